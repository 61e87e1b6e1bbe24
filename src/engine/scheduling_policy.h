// The engine's scheduling policy: which waiting requests start, and which tokens of the running
// sequences go into the next forward call. Pure logic over small views, so it is unit-tested
// without a model; the elastic batcher (R-EB) replaces FirstComePolicy behind this interface.
#pragma once

#include <memory>
#include <vector>

namespace k25 {

// A running sequence as the policy sees it.
struct SequenceView {
  int index = 0;      // position in the engine's running list (stable for one call)
  int priority = 50;  // R-FP4
  int n_pending = 0;  // tokens known but not yet in the KV cache (prompt rest, or 1 when decoding)
  bool decoding = false;  // the prompt is done; n_pending is the last sampled token
};

// n_tokens of sequence `index`, starting at its first pending token.
struct StepSlice {
  int index = 0;
  int n_tokens = 0;
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;
  // How many requests from the front of the waiting queue (arrival order) to start now.
  virtual int n_to_admit(int n_waiting, int n_free_slots) const = 0;
  // The slices of the next forward call; empty only when no sequence has pending tokens.
  virtual std::vector<StepSlice> plan_step(const std::vector<SequenceView>& running) const = 0;
};

// First come, first served: every free slot is filled in arrival order; each step carries one
// decode token of every decoding sequence, then prompt chunks in running order until the token
// budget is spent (at least one prompt token is always taken, so prefill never starves).
class FirstComePolicy final : public SchedulingPolicy {
 public:
  explicit FirstComePolicy(int step_token_budget);
  int n_to_admit(int n_waiting, int n_free_slots) const override;
  std::vector<StepSlice> plan_step(const std::vector<SequenceView>& running) const override;

 private:
  int step_token_budget_;
};

std::unique_ptr<SchedulingPolicy> make_first_come_policy(int step_token_budget);

}  // namespace k25
