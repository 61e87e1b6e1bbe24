#include "engine/scheduler_replay.h"

#include <algorithm>
#include <deque>
#include <optional>

#include "core/error.h"
#include "engine/step_budget_calibrator.h"

namespace k25 {
namespace {

// A sent request as the engine holds it (engine_sequence.h's fields that the scheduler reads).
struct SimSequence {
  int request = 0;
  bool running = false;
  bool finished = false;
  double queued_since = 0;
  double last_served = 0;
  int n_tokens = 0;  // the prompt, then every generated token
  int n_computed = 0;
  int generated = 0;
  int last_prefill_step = -1;
};

class Replay {
 public:
  Replay(const std::vector<ReplayRequest>& requests, const ReplayOptions& options)
      : requests_(requests), o_(options), scheduler_(options.scheduler) {
    if (requests.empty()) fail("replay: no requests");
    if (o_.concurrency < 0) fail("replay: concurrency must be >= 0");
    if (o_.page_tokens < 1) fail("replay: page_tokens must be >= 1");
    for (const ReplayRequest& r : requests) {
      if (r.prompt_tokens < 1 || r.max_tokens < 1) fail("replay: a request needs tokens");
    }
    if (o_.target_step_ms > 0) {
      calibrator_.emplace(ceiling_over(o_.target_step_ms, o_.scheduler.step_token_budget,
                                       o_.scheduler.position_cost, o_.scheduler.micro_task_tokens));
      apply_calibration();
    }
    result_.requests.resize(requests.size());
    if (o_.concurrency > 0) {
      while (next_ < std::min<int>(o_.concurrency, n_requests())) send(0);
    } else {
      order_ = sorted_by_arrival();
    }
  }

  ReplayResult run() {
    while (n_finished_ < n_requests()) {
      if (o_.concurrency == 0) send_arrivals();
      if (n_unfinished() == 0) {
        now_ = requests_[order_[next_]].arrival_s;  // idle until the next arrival
        continue;
      }
      step();
    }
    return std::move(result_);
  }

 private:
  int n_requests() const { return static_cast<int>(requests_.size()); }
  int n_unfinished() const { return static_cast<int>(seqs_.size()) - n_finished_; }

  std::vector<int> sorted_by_arrival() const {
    std::vector<int> order(requests_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return requests_[a].arrival_s < requests_[b].arrival_s; });
    return order;
  }

  // Sends the next request (in order of arrival when open loop) at `t`.
  void send(double t) {
    const int r = o_.concurrency > 0 ? next_ : order_[next_];
    ++next_;
    SimSequence s;
    s.request = r;
    s.queued_since = t;
    s.n_tokens = requests_[r].prompt_tokens;
    seqs_.push_back(s);
    result_.requests[r].sent_s = t;
  }

  void send_arrivals() {
    while (next_ < n_requests() && requests_[order_[next_]].arrival_s <= now_) {
      send(requests_[order_[next_]].arrival_s);
    }
  }

  void apply_calibration() {
    if (const std::optional<StepCalibration> c = calibrator_->calibration()) {
      scheduler_.set_step_cost(c->step_token_budget, c->position_cost);
    }
  }

  void step() {
    std::vector<SeqView> views;
    std::vector<SimSequence*> live;
    for (SimSequence& s : seqs_) {
      if (s.finished) continue;
      SeqView v;
      v.running = s.running;
      v.priority = requests_[s.request].priority;
      v.waited_s = now_ - (s.running ? s.last_served : s.queued_since);
      v.n_tokens = s.n_tokens;
      v.n_computed = s.n_computed;
      v.pages_held = (s.n_computed + o_.page_tokens - 1) / o_.page_tokens;
      v.arrival = static_cast<uint64_t>(s.request);
      v.continues_prefill = s.running && steps_ > 0 && s.last_prefill_step == steps_;
      views.push_back(v);
      live.push_back(&s);
    }
    // Memory is not what a replay studies: the pool always has room.
    const StepDecision d = scheduler_.plan(views, {1L << 40, o_.page_tokens});
    for (int i : d.drop_kv) live[i]->n_computed = 0;
    for (int i : d.preempt) {
      live[i]->running = false;
      live[i]->queued_since = now_;
    }
    for (int i : d.admit) {
      live[i]->running = true;
      live[i]->last_served = now_;
    }
    for (int i : d.yielded) live[i]->last_served = now_;
    if (d.tasks.empty()) fail("replay: the scheduler planned an empty step");
    ++steps_;
    int tokens = 0;
    double positions = 0;
    for (const TaskDescriptor& t : d.tasks) {
      tokens += t.length;
      positions += context_positions(t.start, t.length);
    }
    const double ms =
        o_.cost.fixed_ms + o_.cost.per_token_ms * tokens + o_.cost.per_position_ms * positions;
    now_ += ms / 1000.0;
    if (calibrator_) {
      calibrator_->observe(tokens, positions, ms);
      apply_calibration();
    }
    std::vector<int> prefilled;
    for (const TaskDescriptor& t : d.tasks) {
      SimSequence& s = *live[t.seq];
      s.last_served = now_;
      if (t.length > 1) {
        s.last_prefill_step = steps_;
        prefilled.push_back(s.request);
      }
      s.n_computed += t.length;
      if (s.n_computed == s.n_tokens) sample(s);
    }
    result_.step_ms.push_back(ms);
    result_.prefilled.push_back(std::move(prefilled));
    result_.steps = steps_;
  }

  void sample(SimSequence& s) {
    ++s.generated;
    ++s.n_tokens;
    ReplayOutcome& out = result_.requests[s.request];
    if (s.generated == 1) out.first_token_s = now_;
    if (s.generated < requests_[s.request].max_tokens) return;
    s.finished = true;
    out.finished_s = now_;
    ++n_finished_;
    if (o_.concurrency > 0 && next_ < n_requests()) send(now_);
  }

  const std::vector<ReplayRequest>& requests_;
  const ReplayOptions& o_;
  ElasticScheduler scheduler_;
  std::optional<StepBudgetCalibrator> calibrator_;
  std::deque<SimSequence> seqs_;  // sent requests (a deque: sending keeps `live` pointers valid)
  std::vector<int> order_;        // open loop: request indices by arrival
  int next_ = 0;                  // requests sent so far
  int n_finished_ = 0;
  int steps_ = 0;
  double now_ = 0;
  ReplayResult result_;
};

}  // namespace

ReplayResult replay_schedule(const std::vector<ReplayRequest>& requests,
                             const ReplayOptions& options) {
  return Replay(requests, options).run();
}

}  // namespace k25
