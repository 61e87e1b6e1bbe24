#include "engine/engine.h"

#include <algorithm>
#include <iostream>

#include "core/clock.h"
#include "core/error.h"
#include "engine/engine_sequence.h"
#include "engine/step_cost.h"
#include "kernels/kv_dtype.h"

namespace k25 {

namespace {
int resolve_context(const Model& model, const EngineOptions& o) {
  const int model_context = model.config().context_length;
  return o.context_size <= 0 ? model_context : std::min(o.context_size, model_context);
}

SchedulerOptions scheduler_options(const EngineOptions& o, const ModelConfig& config) {
  SchedulerOptions s;
  s.max_batch_size = o.max_batch_size;
  s.step_token_budget = o.step_token_budget;
  s.position_cost = o.position_cost < 0 ? estimated_position_cost(config) : o.position_cost;
  s.micro_task_tokens = o.micro_task_tokens;
  s.aging_per_second = o.aging_per_second;
  s.preempt_min_priority = o.preempt_min_priority;
  return s;
}
}  // namespace

Engine::Engine(Model& model, EngineOptions options)
    : model_(model),
      options_(options),
      context_size_(resolve_context(model, options)),
      scheduler_(scheduler_options(options, model.config())),
      pruner_(model.config(), AdaptiveOptions{}),
      drafter_(options.speculation.drafter ? options.speculation.drafter
                                           : std::make_shared<NgramDrafter>()),
      self_draft_plan_(std::make_shared<ComputePlan>(
          self_draft_plan(model.config().n_layers, model.config().n_heads))),
      fault_(parse_step_fault(options.debug_fault)) {
  validate(options_.speculation);
  if (options_.max_queue < 0) fail("engine: max_queue must be >= 0");
  if (context_size_ < 2) fail("engine: context size ", context_size_, " is too small");
  if (options_.kv_page_tokens < 1) fail("engine: kv_page_tokens must be >= 1");
  if (!(options_.target_step_ms >= 0)) fail("engine: target_step_ms must be >= 0");
  if (options_.target_step_ms > 0) {
    calibrator_.emplace(
        ceiling_over(options_.target_step_ms, scheduler_.options().step_token_budget,
                     scheduler_.options().position_cost, scheduler_.options().micro_task_tokens));
  }
  stats_.step_token_budget = scheduler_.options().step_token_budget;
  stats_.step_position_cost = scheduler_.options().position_cost;
  if (calibrator_) apply_calibration();
  const ModelConfig& c = model_.config();
  const int kv_dim = c.n_kv_heads * c.head_dim;
  size_t budget = options_.kv_budget_bytes;
  if (budget == 0) {
    const size_t pages_per_seq =
        (static_cast<size_t>(context_size_) + options_.kv_page_tokens - 1) /
        options_.kv_page_tokens;
    budget =
        PagePool::page_bytes_for({options_.kv_page_tokens, c.n_layers, kv_dim, options_.kv_dtype}) *
        pages_per_seq * static_cast<size_t>(options_.max_batch_size);
  }
  kv_ = std::make_unique<PagedKvCache>(c.n_layers, kv_dim, context_size_, budget,
                                       options_.kv_page_tokens, options_.kv_dtype);
  if (kv_->pool().pages_total() == 0) {
    fail("engine: a KV budget of ", budget, " bytes holds no page (one page is ",
         kv_->pool().page_bytes(), " bytes)");
  }
  stats_.kv_pages_total = kv_->pool().pages_total();
  if (options_.kv_page_tokens % kKeyTile != 0) {
    std::cerr << "warning: KV pages of " << options_.kv_page_tokens
              << " positions (flash_scheduler.l2_page_tokens) cannot hold whole key tiles of "
              << kKeyTile
              << ": attention scores them position by position, the slow path; use 16 or more\n";
  }
  if (options_.l1_window > 0) {
    l1_ = std::make_unique<L1WindowKvCache>(*kv_, c.n_layers, kv_dim, options_.l1_window);
  }
  if (options_.prefix_cache) {
    // The seed names the KV geometry; keys only have to agree within one pool.
    const uint64_t seed = (static_cast<uint64_t>(c.n_layers) << 48) ^
                          (static_cast<uint64_t>(kv_dim) << 24) ^
                          static_cast<uint64_t>(options_.kv_page_tokens);
    prefix_ = std::make_unique<PrefixCache>(kv_->pool(), seed);
    kv_->set_reclaimer(prefix_.get());
  }
  if (!options_.l3_path.empty() || options_.l3_backend != EngineOptions::L3Backend::kDisk) {
    open_l3();
  }
  int n_threads = options_.n_threads > 0 ? options_.n_threads
                                         : static_cast<int>(std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(std::max(1, n_threads));
  publish_stats();  // /metrics shows the tiers as opened (L3 pages kept from earlier runs) at once
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  shutdown();
  if (l3_) {
    end_session_fetches(Clock::now(), true);  // their pages join the prefix cache
    // Everything still cached goes to L3 too, so a restarted engine finds it (R-KV4).
    // Bounded in flight: each write holds its page, or a staging copy of it, until it completes.
    prefix_->for_each_page([this](const CachedPage& page) {
      l3_->spill(page, SpillSource::kPage);
      l3_->limit_in_flight(64);
    });
    l3_.reset();  // waits for the writes and saves the index, while the pool still exists
  }
  kv_->set_reclaimer(nullptr);
}

SubmitResult Engine::submit(GenerationRequest request, EventCallback on_event) {
  SubmitResult result;
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) {
    return {SubmitStatus::Invalid, 0, "the prompt has no tokens"};
  }
  const bool embedding = request.embedding.has_value();
  if (embedding && n_prompt > context_size_) {
    return {SubmitStatus::Invalid, 0,
            concat("the input has ", n_prompt, " tokens; the context holds ", context_size_)};
  }
  if (!embedding && n_prompt >= context_size_) {
    return {SubmitStatus::Invalid, 0,
            concat("the prompt has ", n_prompt, " tokens; the context holds ", context_size_,
                   " (prompt and at least one generated token)")};
  }
  if (embedding && ((request.plan && !request.plan->is_full()) || request.adaptive_pruning)) {
    return {SubmitStatus::Invalid, 0, "an embedding request runs the whole model (no pruning)"};
  }
  // The prompt's positions and a generated token's (none for an embedding).
  const int n_positions = n_prompt + (embedding ? 0 : 1);
  const size_t prompt_pages =
      static_cast<size_t>(n_positions + options_.kv_page_tokens - 1) / options_.kv_page_tokens;
  if (prompt_pages > kv_->pool().pages_total()) {
    return {SubmitStatus::Invalid, 0,
            concat("the prompt has ", n_prompt, " tokens; the KV budget (", kv_->bytes_budget(),
                   " bytes) holds ", kv_->pool().pages_total() * options_.kv_page_tokens,
                   " positions")};
  }
  if (!embedding && request.max_tokens < 1)
    return {SubmitStatus::Invalid, 0, "max_tokens must be >= 1"};
  const int n_vocab = model_.config().n_vocab;
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= n_vocab) {
      return {SubmitStatus::Invalid, 0, concat("prompt token ", t, " is outside the vocabulary")};
    }
  }
  std::unique_ptr<Sequence> seq;
  try {
    seq = std::make_unique<Sequence>(0, std::move(request), std::move(on_event), n_vocab,
                                     model_.config().dim, options_.speculation);
    if (seq->request.speculative == SpeculativeMode::kSelf && !seq->pooler) {
      // The request's pruned plan (or the engine's) drafts; the full model answers.
      seq->draft_plan = seq->plan() ? seq->current_plan : self_draft_plan_;
      seq->current_plan = nullptr;
      seq->request.adaptive_pruning = false;
    }
    if (seq->request.grammar) {
      std::vector<TokenId> end_tokens = seq->request.stop_tokens;
      if (!seq->request.ignore_eos) {
        const auto& eog = grammar_vocabulary_.get(model_.tokenizer())->end_of_generation();
        end_tokens.insert(end_tokens.end(), eog.begin(), eog.end());
      }
      seq->grammar.emplace(seq->request.grammar, grammar_vocabulary_.get(model_.tokenizer()),
                           std::move(end_tokens));
    }
  } catch (const Error& e) {
    return {SubmitStatus::Invalid, 0, e.what()};
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return {SubmitStatus::ShuttingDown, 0, "the engine is shutting down"};
    // Free batch slots take requests at the next step, so they count as room besides the queue.
    const int capacity = options_.max_queue + options_.max_batch_size - n_running_shared_;
    if (n_queued_shared_ >= capacity) {
      return {SubmitStatus::QueueFull, 0,
              concat("the queue is full (", options_.max_queue, " requests waiting)")};
    }
    seq->id = next_id_++;
    result.id = seq->id;
    submitted_.push_back(std::move(seq));
    ++n_queued_shared_;
    stats_.requests_waiting = n_queued_shared_;
  }
  wake_.notify_one();
  return result;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancel_requests_.insert(id);
  }
  wake_.notify_one();
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_everything_ = true;
  }
  wake_.notify_one();
}

void Engine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Engine::n_active() const {
  std::lock_guard lock(mutex_);
  return n_queued_shared_ + n_running_shared_;
}

void Engine::run() {
  for (;;) {
    wait_for_work();
    bool stop = false;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        cancel_everything_ = true;
        stop = true;
      }
    }
    // The exception barrier: nothing that goes wrong in a step (out of memory, a bug) may end
    // the engine thread, which would take every request down (std::terminate).
    try {
      take_submissions();
      apply_cancellations();
      if (!stop) {
        expire_queued();
        step();
      }
    } catch (const std::exception& e) {
      fail_step(e.what());
    } catch (...) {
      fail_step("unknown exception");
    }
    release_finished();
    if (stop) return;
  }
}

void Engine::fail_after_exception(Sequence& seq, const std::string& what) {
  seq.full_model_computed = 0;  // so none of its KV is cached or written to L3
  finish(seq, FinishReason::Error, concat("internal error: ", what));
}

void Engine::fail_step(const std::string& what) {
  ++stats_.step_failures;
  std::cerr << "error: an engine step failed (" << what << "); its requests fail\n";
  bool any_running = false;
  for (const auto& seq : seqs_) any_running |= seq->running && !seq->finished;
  for (auto& seq : seqs_) {
    if (!seq->finished && (seq->running || !any_running)) fail_after_exception(*seq, what);
  }
}

void Engine::wait_for_work() {
  std::unique_lock lock(mutex_);
  auto interrupted = [&] { return stopping_ || cancel_everything_ || !cancel_requests_.empty(); };
  if (seqs_.empty()) {
    const auto woken = [&] { return interrupted() || !submitted_.empty(); };
    if (l3_ && (options_.l3_idle_seconds > 0 || session_prefetcher_)) {
      // Idle, but cached KV may go quiet and move to L3, and hot sessions come back: a step
      // (with no sequence) spills the one and prefetches the other.
      if (!wake_.wait_for(lock, idle_wait(), woken)) return;
    } else {
      wake_.wait(lock, woken);
    }
    // Idle until now: give simultaneous arrivals a moment to share the first step (R-EB4).
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.batch_timeout_ms);
    wake_.wait_until(lock, deadline, [&] {
      return interrupted() || static_cast<int>(submitted_.size()) >= options_.max_batch_size;
    });
  }
}

Engine::Clock::duration Engine::idle_wait() const {
  Clock::duration wait =
      options_.l3_idle_seconds > 0 ? idle_spill_interval() : std::chrono::seconds(1);
  if (!session_fetches_.empty())
    return std::min<Clock::duration>(wait, std::chrono::milliseconds(2));
  if (session_prefetcher_) {
    if (std::optional<Clock::time_point> due = session_prefetcher_->next_due(prefetch_lead())) {
      wait =
          std::min(wait, std::max<Clock::duration>(*due - Clock::now(), Clock::duration::zero()));
    }
  }
  return wait;
}

void Engine::take_submissions() {
  std::lock_guard lock(mutex_);
  while (!submitted_.empty()) {
    seqs_.push_back(std::move(submitted_.front()));
    submitted_.pop_front();
  }
}

void Engine::apply_cancellations() {
  std::unordered_set<RequestId> ids;
  bool everything = false;
  {
    std::lock_guard lock(mutex_);
    ids.swap(cancel_requests_);
    everything = cancel_everything_;
    cancel_everything_ = false;
  }
  if (!everything && ids.empty()) return;
  for (auto& seq : seqs_) {
    if (everything || ids.count(seq->id)) finish(*seq, FinishReason::Cancelled);
  }
}

void Engine::expire_queued() {
  if (options_.queue_timeout_ms <= 0) return;
  const Clock::time_point now = Clock::now();
  for (auto& seq : seqs_) {
    if (seq->started || seq->finished) continue;
    if (ms_between(seq->submitted, now) > options_.queue_timeout_ms) {
      ++stats_.queue_timeouts;
      seq->queue_timeout = true;
      finish(*seq, FinishReason::Error,
             concat("timed out after ", options_.queue_timeout_ms, " ms waiting in the queue"));
    }
  }
}

// One step: the tiers' reads and spills, queued prompts mapped onto cached pages, then
// schedule -> make resident -> run (sampling and publishing happen per forward call, in
// run_group -> on_logits -> finish).
void Engine::step() {
  if (l3_) advance_kv_tiers();
  map_cached_prefixes();
  if (l3_ && await_new_probes()) map_cached_prefixes();  // the answered ones may join this step
  std::optional<ScheduledStep> scheduled = schedule(Clock::now());
  if (!scheduled) return;
  make_resident(*scheduled);
  if (scheduled->decision.tasks.empty()) {
    handle_unschedulable(scheduled->live);
    return;
  }
  fault_.at_step(++n_steps_);
  run_tasks(*scheduled);
}

std::optional<Engine::ScheduledStep> Engine::schedule(const Clock::time_point now) {
  // The scheduler counts a sequence's pages as its own: dropping its KV frees them. Pages that
  // other sequences map too are not freed by that, so each sequence is shown without its
  // leading shared pages, as if its positions started after them (whole pages, so the
  // scheduler's page arithmetic is unchanged); its tasks are shifted back below.
  ScheduledStep out;
  out.now = now;
  std::vector<SeqView> views;
  std::vector<int> shift;  // positions hidden from the scheduler, by view
  for (auto& seq : seqs_) {
    if (seq->finished || seq->restore || seq->awaiting_l3) continue;
    const int shared = pages_shared_with_others(*seq);
    const int hidden = shared * options_.kv_page_tokens;
    SeqView v;
    v.running = seq->running;
    v.priority = seq->request.priority;
    v.waited_s = ms_between(seq->running ? seq->last_served : seq->queued_since, now) / 1000.0;
    v.n_tokens = static_cast<int>(seq->tokens.size()) - hidden;
    v.n_computed = seq->n_computed - hidden;
    v.pages_held =
        seq->kv_id < 0 ? 0 : static_cast<int>(kv_->page_table(seq->kv_id).size()) - shared;
    v.arrival = seq->id;
    v.continues_prefill = seq->running && n_steps_ > 0 && seq->last_prefill_step == n_steps_;
    out.live.push_back(seq.get());
    views.push_back(v);
    shift.push_back(hidden);
  }
  if (out.live.empty()) {
    // Only L3 reads are pending: wait for one instead of spinning (short, for new arrivals).
    if (l3_ && !seqs_.empty()) l3_->poll(std::chrono::milliseconds(2));
    return std::nullopt;
  }
  out.decision =
      scheduler_.plan(views, {static_cast<long>(kv_->pages_available()), options_.kv_page_tokens});
  // A sequence whose KV is dropped this step starts again from position 0 (shared pages too).
  for (int i : out.decision.drop_kv) shift[i] = 0;
  for (TaskDescriptor& t : out.decision.tasks) t.start += shift[t.seq];
  return out;
}

void Engine::make_resident(const ScheduledStep& s) {
  for (int i : s.decision.drop_kv) {
    ++stats_.kv_drops;
    drop_kv(*s.live[i], true);
  }
  for (int i : s.decision.preempt) {
    ++stats_.preemptions;
    s.live[i]->running = false;
    s.live[i]->queued_since = s.now;
  }
  for (int i : s.decision.admit) admit(*s.live[i], s.now);
  for (int i : s.decision.yielded) s.live[i]->last_served = s.now;
  for (Sequence* seq : s.live) {
    if (seq->running && seq->kv_id < 0) seq->kv_id = take_kv_id();
  }
}

void Engine::admit(Sequence& seq, const Clock::time_point now) {
  seq.running = true;
  seq.last_served = now;
  if (!seq.started) {
    // What is computed already at the first admission came from the prefix cache.
    seq.cached_tokens = seq.n_computed;
    if (seq.restored_disk_tokens + seq.restored_shared_tokens > seq.cached_tokens) {
      seq.restored_disk_tokens = seq.restored_shared_tokens = 0;  // its KV was dropped since
    }
    stats_.prompt_tokens += seq.request.prompt.size();
    stats_.cached_prompt_tokens += seq.cached_tokens;
    stats_.cached_tokens_disk += seq.restored_disk_tokens;
    stats_.cached_tokens_shared += seq.restored_shared_tokens;
    stats_.cached_tokens_l2 +=
        seq.cached_tokens - seq.restored_disk_tokens - seq.restored_shared_tokens;
    if (!seq.request.session_id.empty()) {
      ++stats_.session_requests;
      stats_.session_cached_tokens += seq.cached_tokens;
    }
  }
  seq.started = true;
}

void Engine::handle_unschedulable(const std::vector<Sequence*>& live) {
  // Nothing fits although sequences run: the top one needs more KV than the whole budget.
  Sequence* stuck = nullptr;
  for (Sequence* seq : live) {
    if (seq->running && (!stuck || seq->request.priority > stuck->request.priority)) stuck = seq;
  }
  if (!stuck) {
    // Only queued sequences and none admitted (not expected: the best-ranked one always fits);
    // do not spin.
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::milliseconds(1));
  } else if (stuck->n_generated > 0) {
    finish(*stuck, FinishReason::Length);
  } else {
    finish(*stuck, FinishReason::Error,
           concat("the KV budget (", kv_->bytes_budget(), " bytes) cannot hold this request"));
  }
}

void Engine::publish_stats() {
  int n_running = 0;
  std::vector<SeqView> views;
  for (const auto& seq : seqs_) {
    n_running += seq->running ? 1 : 0;
    SeqView v;
    v.n_tokens = static_cast<int>(seq->tokens.size());
    v.n_computed = seq->n_computed;
    views.push_back(v);
  }
  stats_.kv_bytes_used = kv_->bytes_used();
  if (l1_) stats_.l1_hit_share = l1_->hit_share();
  stats_.kv_pages_used = kv_->pages_used();
  if (prefix_) {
    stats_.prefix_cache_pages = prefix_->pages();
    stats_.prefix_cache_idle_pages = prefix_->reclaimable();
    stats_.prefix_cache_evictions = prefix_->stats().evicted_pages;
  }
  if (l3_) {
    const L3TierStats l3 = l3_->disk_stats();
    stats_.l3_spills = l3.spills;
    stats_.l3_spill_failures = l3.spill_failures;
    // For prompts: the disk tier also counts what the session prefetch read (reported apart).
    stats_.l3_restores = l3.restores - std::min<uint64_t>(l3.restores, prefetched_from_disk_);
    stats_.l3_recomputations = l3.restore_failures;
    stats_.l3_pages_stored = l3_->disk_pages_stored();
    stats_.l3_dropped = l3.dropped;
    stats_.l3_read_latency_p99_s = l3_->disk_read_latency_p99_s();
    stats_.l3_read_queue_wait_p99_s = l3.read_queue_wait_p99_s;
    stats_.l3_checksum_failures = l3.checksum_failures;
    stats_.l3_io_errors = l3.io_errors;
    stats_.l3_no_space = l3.no_space;
    stats_.l3_journal_errors = l3.journal_errors;
    stats_.l3_files_lost = l3.files_lost;
    stats_.l3_writes_in_flight = l3.writes_in_flight;
    if (l3_->has_shared()) publish_shared_stats(l3_->shared_stats());
  }
  stats_.micro_task_queue_len = scheduler_.pending_micro_tasks(views);
  std::lock_guard lock(mutex_);
  n_running_shared_ = n_running;
  n_queued_shared_ = static_cast<int>(seqs_.size() + submitted_.size()) - n_running;
  stats_.requests_running = n_running_shared_;
  stats_.requests_waiting = n_queued_shared_;
}

}  // namespace k25
