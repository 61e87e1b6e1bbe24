// The elastic batcher's decisions (SPEC R-EB1..5) as pure logic over small views of the engine's
// sequences, so every rule is unit-tested without a model:
//  - rank: effective priority (base priority plus aging for the time a sequence went without
//    service) in bands of `priority_band` points, then the shorter remainder, then arrival;
//  - admission: queued requests take free batch slots in rank order, as far as the KV pool
//    holds their first micro-task;
//  - preemption: a request at or above `preempt_min_priority` (gold) that finds no slot takes one
//    from the lowest-priority running sequence, which goes back to the queue keeping its KV pages
//    unless memory is needed; memory shortages drop the KV of lower-priority sequences (they
//    recompute it later) before anyone of higher priority waits;
//  - the step: one decode token of every running sequence, then prefill under the step's token
//    budget (weighted by position, see position_cost), never less than prefill_floor of it:
//    first the prompts the step can finish, unless a prompt that went long without service has
//    aged past them, then the best-ranked one (the prompt prefilled last step keeps a lead and
//    takes the turns its class earns by aging, so long prompts finish one after another);
//    emitted as a task descriptor array grouped by compute plan (R-EB1, R-EB3).
#pragma once

#include <cstdint>
#include <vector>

namespace k25 {

struct SchedulerOptions {
  int max_batch_size = 24;      // sequences holding a batch slot (R-EB4)
  int step_token_budget = 512;  // tokens per engine step (R-EB2), in token costs below
  // A token at position p costs 1 + position_cost * p of the step budget: attention grows with
  // the context, so a step of long-context tokens is given fewer of them and every step takes
  // about as long (inter-token latency and a waiting short prompt's first token stay bounded
  // while long prompts prefill). 0 counts tokens only.
  double position_cost = 0;
  int micro_task_tokens = 128;     // prefill chunk (R-EB2); see docs/engine.md for the choice
  double aging_per_second = 10.0;  // priority points gained per second without service (R-EB3)
  double priority_band = 10.0;     // effective priorities this close count as equal
  int preempt_min_priority = 100;  // arrivals with at least this base priority may preempt (gold)
  // Share of step_token_budget that prefill gets even when decode tokens have used the budget up
  // (a step may then run over it by this much): with many sequences decoding, prompts still move.
  double prefill_floor = 0.25;
  // A prompt this step can finish ranks this many priority points higher for prefill order: a
  // short prompt's first token comes before a long prompt's next chunk, until the long prompt
  // has gone finisher_lead / aging_per_second seconds without service.
  double finisher_lead = 100.0;
  // A prompt whose prefill ran in the previous step ranks this many points higher for prefill
  // order, so prompts of one class are prefilled one after another, not in turns: without it, a
  // waiting prompt ages past the one being served within one band's worth of seconds and they
  // alternate, and all of them get their first token late. Below the gap between gold and silver,
  // so a gold prompt still goes first.
  double continuation_lead = 40.0;
};

// A sequence as the scheduler sees it; running or queued (never started, or preempted).
struct SeqView {
  bool running = false;
  int priority = 50;               // base priority (R-FP4: gold 100, silver 50, bronze 10)
  double waited_s = 0;             // seconds without service: since queued, or since its last task
  int n_tokens = 0;                // tokens known: the prompt, then every generated token
  int n_computed = 0;              // positions whose K/V are in the cache
  int pages_held = 0;              // KV pages it holds
  uint64_t arrival = 0;            // submission order (ties)
  bool continues_prefill = false;  // its prompt had a prefill task in the previous step

  int n_pending() const { return n_tokens - n_computed; }
};

struct PoolView {
  long free_pages = 0;
  int page_tokens = 16;
};

// One entry of the task descriptor array (R-EB1): `length` tokens of sequence `seq` (an index
// into the views) from position `start`.
struct TaskDescriptor {
  int seq = 0;
  int start = 0;
  int length = 0;
  double priority = 0;  // effective priority when planned
};

// The sum of the context positions of `length` tokens from position `start`: the part of a step's
// work that attention grows with (SchedulerOptions::position_cost, StepBudgetCalibrator).
inline double context_positions(int start, int length) {
  return double{1.0} * length * start + double{1.0} * length * (length - 1) / 2;
}

struct StepDecision {
  std::vector<int> admit;    // queued sequences that take a batch slot now
  std::vector<int> preempt;  // running sequences sent back to the queue
  std::vector<int> drop_kv;  // sequences whose KV pages are released (they recompute later)
  // In priority order; tasks of any compute plans share the step's forward call.
  std::vector<TaskDescriptor> tasks;
  // Prompts whose prefill turn went to the started prompt of their class: they count as served
  // this step (their aging restarts), as they would have been had they taken the turn.
  std::vector<int> yielded;
};

class ElasticScheduler {
 public:
  // Throws k25::Error on a non-positive size, budget or micro-task length.
  explicit ElasticScheduler(SchedulerOptions options);

  // The engine applies the decision in this order: drop_kv, preempt, admit, then runs tasks.
  StepDecision plan(const std::vector<SeqView>& seqs, PoolView pool) const;

  // Prefill micro-tasks not yet run, over all sequences (R-EB6's queue length).
  int pending_micro_tasks(const std::vector<SeqView>& seqs) const;

  double effective_priority(const SeqView& s) const {
    return s.priority + options_.aging_per_second * s.waited_s;
  }
  const SchedulerOptions& options() const { return options_; }
  // The engine's measured step cost (StepBudgetCalibrator) replaces the configured one.
  void set_step_cost(int step_token_budget, double position_cost);

 private:
  SchedulerOptions options_;
};

}  // namespace k25
