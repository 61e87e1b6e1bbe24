#include "engine/elastic_scheduler.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace k25 {

ElasticScheduler::ElasticScheduler(SchedulerOptions options) : options_(options) {
  if (options_.max_batch_size < 1) fail("scheduler: max_batch_size must be >= 1");
  if (options_.step_token_budget < 1) fail("scheduler: step_token_budget must be >= 1");
  if (options_.micro_task_tokens < 1) fail("scheduler: micro_task_tokens must be >= 1");
  if (options_.aging_per_second < 0) fail("scheduler: aging_per_second must be >= 0");
  if (options_.priority_band <= 0) fail("scheduler: priority_band must be > 0");
  if (!(options_.position_cost >= 0)) fail("scheduler: position_cost must be >= 0");
  if (!(options_.prefill_floor >= 0 && options_.prefill_floor <= 1))
    fail("scheduler: prefill_floor must be in [0, 1]");
  if (!(options_.finisher_lead >= 0)) fail("scheduler: finisher_lead must be >= 0");
  if (!(options_.continuation_lead >= 0)) fail("scheduler: continuation_lead must be >= 0");
}

void ElasticScheduler::set_step_cost(int step_token_budget, double position_cost) {
  if (step_token_budget < 1) fail("scheduler: step_token_budget must be >= 1");
  if (!(position_cost >= 0)) fail("scheduler: position_cost must be >= 0");
  options_.step_token_budget = step_token_budget;
  options_.position_cost = position_cost;
}

int ElasticScheduler::pending_micro_tasks(const std::vector<SeqView>& seqs) const {
  int n = 0;
  for (const SeqView& s : seqs) {
    if (s.n_pending() > 1)
      n += (s.n_pending() + options_.micro_task_tokens - 1) / options_.micro_task_tokens;
  }
  return n;
}

namespace {

// The decision being built: a working copy of what each sequence holds, updated as sequences
// are preempted, admitted, dropped and given tasks.
class Planner {
 public:
  Planner(const ElasticScheduler& scheduler, const std::vector<SeqView>& seqs, PoolView pool)
      : opt_(scheduler.options()),
        seqs_(seqs),
        page_tokens_(pool.page_tokens),
        free_(pool.free_pages) {
    const size_t n = seqs.size();
    eff_.resize(n);
    running_.resize(n);
    held_.resize(n);
    computed_.resize(n);
    task_of_.assign(n, -1);
    admitted_now_.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
      eff_[i] = scheduler.effective_priority(seqs[i]);
      running_[i] = seqs[i].running;
      held_[i] = seqs[i].pages_held;
      computed_[i] = seqs[i].n_computed;
      n_running_ += running_[i] ? 1 : 0;
    }
  }

  StepDecision run() {
    admit_queued();
    promised_ = 0;  // from here on, the admitted sequences compete for pages by rank
    plan_decode_tokens();
    plan_prefill();
    return std::move(d_);
  }

 private:
  int n_seqs() const { return static_cast<int>(seqs_.size()); }
  int pending(int i) const { return seqs_[i].n_tokens - computed_[i]; }
  bool tasked(int i) const { return task_of_[i] >= 0; }
  // Whether a outranks b: priority band (effective priority / priority_band), then the shorter
  // remainder (a short prompt's first token is not stuck behind a long prompt's chunks), then
  // arrival.
  bool outranks(int a, int b) const {
    const long band_a = static_cast<long>(eff_[a] / opt_.priority_band);
    const long band_b = static_cast<long>(eff_[b] / opt_.priority_band);
    if (band_a != band_b) return band_a > band_b;
    if (pending(a) != pending(b)) return pending(a) < pending(b);
    return seqs_[a].arrival < seqs_[b].arrival;
  }
  long pages_needed(int i, int positions) const {
    const long total = (positions + page_tokens_ - 1) / page_tokens_;
    return std::max(0L, total - held_[i]);
  }
  // Whether i's next token is set aside in next_token_reserve(): running sequences without a
  // task yet (those admitted this step have their first micro-task promised instead).
  bool reserves_next_token(int i) const {
    return running_[i] && !tasked(i) && !admitted_now_[i] && pending(i) > 0;
  }
  // Pages the running sequences need for their next token (except `skip`), plus the first
  // micro-tasks promised to the sequences admitted this step.
  long next_token_reserve(int skip = -1) const {
    long sum = promised_;
    for (int i = 0; i < n_seqs(); ++i) {
      if (i != skip && reserves_next_token(i)) {
        sum += pages_needed(i, computed_[i] + 1);
      }
    }
    return sum;
  }

  void drop(int i) {
    free_ += held_[i];
    held_[i] = 0;
    computed_[i] = 0;
    d_.drop_kv.push_back(i);
  }
  void preempt(int i, bool drop_kv) {
    running_[i] = false;
    --n_running_;
    d_.preempt.push_back(i);
    if (drop_kv) drop(i);
  }

  // Sequences ranked below `for_seq` whose pages may be taken: queued ones first (cheapest),
  // then running ones without a task this step; lowest priority first within each.
  std::vector<int> memory_victims(int for_seq) const {
    std::vector<int> victims;
    for (int i = 0; i < n_seqs(); ++i) {
      if (i == for_seq || held_[i] == 0 || !outranks(for_seq, i)) continue;
      if (running_[i] && (tasked(i) || admitted_now_[i])) continue;
      victims.push_back(i);
    }
    std::sort(victims.begin(), victims.end(), [&](int a, int b) {
      if (running_[a] != running_[b]) return !running_[a];
      return outranks(b, a);
    });
    return victims;
  }

  // Makes `need` pages free for `for_seq` plus what the remaining running sequences need for
  // their next token (when `keep_reserve`). Takes nothing unless it can succeed.
  bool make_room(int for_seq, long need, bool keep_reserve) {
    auto wanted = [&] { return need + (keep_reserve ? next_token_reserve(for_seq) : 0); };
    if (free_ >= wanted()) return true;
    const std::vector<int> victims = memory_victims(for_seq);
    long reachable = free_;
    for (int v : victims) reachable += held_[v];
    long reserve_left = 0;
    if (keep_reserve) {
      reserve_left = promised_;
      for (int i = 0; i < n_seqs(); ++i) {
        const bool victim = std::find(victims.begin(), victims.end(), i) != victims.end();
        if (i != for_seq && !victim && reserves_next_token(i)) {
          reserve_left += pages_needed(i, computed_[i] + 1);
        }
      }
    }
    if (reachable < need + reserve_left) return false;
    for (int v : victims) {
      if (free_ >= wanted()) break;
      if (running_[v]) {
        preempt(v, true);
      } else {
        drop(v);
      }
    }
    return free_ >= wanted();
  }

  // Lowest-ranked running sequence that `for_seq` outranks and whose base priority is below
  // for_seq's (aging alone never preempts), or -1. Sequences admitted this step are kept.
  int slot_victim(int for_seq) const {
    int best = -1;
    for (int i = 0; i < n_seqs(); ++i) {
      if (!running_[i] || admitted_now_[i] || !outranks(for_seq, i)) continue;
      if (seqs_[i].priority >= seqs_[for_seq].priority) continue;
      if (best < 0 || outranks(best, i)) best = i;
    }
    return best;
  }

  void admit_queued() {
    std::vector<int> queued;
    for (int i = 0; i < n_seqs(); ++i) {
      if (!running_[i]) queued.push_back(i);
    }
    std::sort(queued.begin(), queued.end(), [&](int a, int b) { return outranks(a, b); });
    for (int q : queued) {
      // With the batch full only gold may enter, by preemption; a queued request that cannot does
      // not stop a lower-ranked gold one behind it.
      const bool may_preempt = seqs_[q].priority >= opt_.preempt_min_priority;
      if (n_running_ >= opt_.max_batch_size && (!may_preempt || slot_victim(q) < 0)) continue;
      const int first_chunk = std::min(pending(q), opt_.micro_task_tokens);
      const long need = pages_needed(q, computed_[q] + first_chunk);
      if (!make_room(q, need, true)) break;
      if (n_running_ >= opt_.max_batch_size) {
        const int victim = slot_victim(q);
        if (victim < 0) continue;
        preempt(victim, false);  // it keeps its pages while the pool can spare them
      }
      running_[q] = true;
      admitted_now_[q] = true;
      promised_ += need;
      ++n_running_;
      d_.admit.push_back(q);
    }
  }

  std::vector<int> running_by_rank() const {
    std::vector<int> order;
    for (int i = 0; i < n_seqs(); ++i) {
      if (running_[i]) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return outranks(a, b); });
    return order;
  }

  // Adds `length` tokens to i's task (creating it) when the pool holds them, taking pages from
  // lower-ranked sequences if needed; returns the tokens actually added (fewer when memory is
  // short, 0 when none fit).
  int add_tokens(int i, int length) {
    const int start = computed_[i] + (tasked(i) ? d_.tasks[task_of_[i]].length : 0);
    if (pages_needed(i, start + length) > free_)
      make_room(i, pages_needed(i, start + length), false);
    const long fits = (held_[i] + free_) * page_tokens_ - start;
    length = static_cast<int>(std::min<long>(length, fits));
    if (length <= 0) return 0;
    const long need = pages_needed(i, start + length);
    free_ -= need;
    held_[i] += static_cast<int>(need);
    if (tasked(i)) {
      d_.tasks[task_of_[i]].length += length;
    } else {
      task_of_[i] = static_cast<int>(d_.tasks.size());
      d_.tasks.push_back({i, computed_[i], length, eff_[i]});
    }
    return length;
  }

  // Budget cost of `length` tokens from position `start` (see SchedulerOptions::position_cost).
  double cost(int start, int length) const {
    return length + opt_.position_cost * context_positions(start, length);
  }

  // The most tokens from `start` (at most `left`) whose cost fits in `allowance`.
  int tokens_within(int start, int left, double allowance) const {
    int lo = 0, hi = left;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (cost(start, mid) <= allowance) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  void plan_decode_tokens() {
    for (int i : running_by_rank()) {
      if (running_[i] && pending(i) == 1) {
        const int start = computed_[i];
        budget_ -= cost(start, add_tokens(i, 1));
      }
    }
  }

  void plan_prefill() {
    // Prefill gets at least the floor, whatever the decode tokens took.
    budget_ = std::max(budget_, opt_.prefill_floor * opt_.step_token_budget);
    std::vector<int> order;
    for (int i : running_by_rank()) {
      if (running_[i] && !tasked(i) && pending(i) > 1) order.push_back(i);
    }
    // Prompts the step can finish go first, whatever their class: each costs little and yields a
    // first token, where the same tokens spent on a long prompt bring its first token only a
    // little closer. A long prompt left without service ages, and finisher_lead bounds how long
    // finishers keep coming first (it never starves behind a stream of short prompts). The prompt
    // prefilled last step keeps its turn over others of its class (continuation_lead).
    std::vector<double> rank(n_seqs(), 0);
    std::vector<bool> finishes(n_seqs(), false);
    for (int i : order) {
      finishes[i] = cost(computed_[i], pending(i)) <= budget_;
      rank[i] = eff_[i] + (finishes[i] ? opt_.finisher_lead : 0) +
                (seqs_[i].continues_prefill ? opt_.continuation_lead : 0);
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const long band_a = static_cast<long>(rank[a] / opt_.priority_band);
      const long band_b = static_cast<long>(rank[b] / opt_.priority_band);
      return band_a > band_b;
    });
    give_turns_to_started_prompts(order, finishes);
    any_ = false;
    // Then the best-ranked prompt takes what it can (micro-tasks of one sequence merge into one
    // descriptor): a gold prompt is not slowed by bronze ones.
    for (int i : order) {
      if (!prefill(i)) return;
    }
  }

  // A prompt of the continuing prompt's class that aged past it (more than continuation_lead
  // without service) has earned its class a turn; the started prompt takes that turn in its place
  // and the waiting one counts as served (StepDecision::yielded). Its class gets the same turns
  // as before, against other classes and short prompts alike, but its long prompts are prefilled
  // one after another: served in turns, all of them got their first token near the end.
  void give_turns_to_started_prompts(std::vector<int>& order, const std::vector<bool>& finishes) {
    for (size_t c = 0; c < order.size(); ++c) {
      const int started = order[c];
      if (!seqs_[started].continues_prefill) continue;
      for (size_t w = 0; w < c; ++w) {
        const int waiting = order[w];
        if (seqs_[waiting].priority == seqs_[started].priority &&
            !seqs_[waiting].continues_prefill && !finishes[waiting]) {
          std::swap(order[w], order[c]);
          d_.yielded.push_back(waiting);
          break;
        }
      }
    }
  }

  // Adds i's prompt tokens to its task as far as the budget goes; false once it is spent.
  bool prefill(int i) {
    const int start = computed_[i] + (tasked(i) ? d_.tasks[task_of_[i]].length : 0);
    const int left = seqs_[i].n_tokens - start;
    if (left <= 0 || !running_[i]) return true;
    // The first prefill of a step always gets at least one token, so prefill never starves.
    const int n = std::max(tokens_within(start, left, budget_), any_ ? 0 : 1);
    if (n <= 0) return false;
    const int added = add_tokens(i, n);
    budget_ -= cost(start, added);
    any_ = any_ || added > 0;
    return true;
  }

  const SchedulerOptions& opt_;
  const std::vector<SeqView>& seqs_;
  int page_tokens_;
  long free_;
  double budget_ = opt_.step_token_budget;
  int n_running_ = 0;
  std::vector<double> eff_;
  std::vector<bool> running_;
  std::vector<int> held_;
  std::vector<int> computed_;
  std::vector<int> task_of_;  // index into d_.tasks, or -1
  std::vector<bool> admitted_now_;
  long promised_ = 0;  // pages of the first micro-tasks of sequences admitted this step
  bool any_ = false;   // a prefill task was planned this step
  StepDecision d_;
};

}  // namespace

StepDecision ElasticScheduler::plan(const std::vector<SeqView>& seqs, PoolView pool) const {
  if (pool.page_tokens < 1) fail("scheduler: page_tokens must be >= 1");
  return Planner(*this, seqs, pool).run();
}

}  // namespace k25
