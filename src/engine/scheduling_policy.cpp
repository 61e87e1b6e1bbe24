#include "engine/scheduling_policy.h"

#include <algorithm>

#include "util/error.h"

namespace k25 {

FirstComePolicy::FirstComePolicy(int step_token_budget) : step_token_budget_(step_token_budget) {
  if (step_token_budget_ < 1)
    fail("scheduler: step token budget must be >= 1, got ", step_token_budget);
}

int FirstComePolicy::n_to_admit(int n_waiting, int n_free_slots) const {
  return std::max(0, std::min(n_waiting, n_free_slots));
}

std::vector<StepSlice> FirstComePolicy::plan_step(const std::vector<SequenceView>& running) const {
  std::vector<StepSlice> slices;
  int budget = step_token_budget_;
  // Decode tokens first: one per sequence keeps every stream moving at the same pace.
  for (const SequenceView& s : running) {
    if (s.decoding && s.n_pending > 0) {
      slices.push_back({s.index, 1});
      --budget;
    }
  }
  bool took_prefill = false;
  for (const SequenceView& s : running) {
    if (s.decoding || s.n_pending <= 0) continue;
    if (budget <= 0 && took_prefill) break;
    int n = std::min(s.n_pending, std::max(budget, 1));
    slices.push_back({s.index, n});
    budget -= n;
    took_prefill = true;
  }
  return slices;
}

std::unique_ptr<SchedulingPolicy> make_first_come_policy(int step_token_budget) {
  return std::make_unique<FirstComePolicy>(step_token_budget);
}

}  // namespace k25
