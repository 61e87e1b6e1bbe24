// The step budget measured, not assumed: fits each engine step's wall time to the work it held,
//   ms = fixed_ms + per_token_ms * tokens + per_position_ms * positions
// (positions: the sum of the context positions of the step's tokens, the part attention grows
// with), by least squares with exponential forgetting, so the fit follows the machine it runs on
// (its ISA, its memory, other load). A target step time then gives the scheduler's
// step_token_budget and position_cost (SchedulerOptions): a step of budget B at cost
// tokens + position_cost * positions takes about target_ms. With a configured budget the target
// is a ceiling: the configured budget and position cost stay while a step they fill is predicted
// to take no longer than the target (on the mix of positions the steps seen had), and the
// measured ones take over only on a machine where it would take longer. Until the fit is trusted
// (min_steps), that ceiling is provisional: before any step is timed, steps hold first_budget;
// after, the time per unit of step cost seen so far, fixed part included (so it errs towards
// smaller steps), caps the configured budget. A fresh server's first burst of prompts is then cut
// into steps near the target from the start, not into steps of the whole configured budget.
#pragma once

#include <array>
#include <optional>

namespace k25 {

struct StepCalibration {
  int step_token_budget = 0;
  double position_cost = 0;
  double fixed_ms = 0;      // weights read once per step, thread start-up, ...
  double per_token_ms = 0;  // per token at position 0
};

struct CalibratorOptions {
  double target_step_ms = 250;
  double forgetting = 0.97;  // weight of the past per observed step (about 33 steps of memory)
  int min_steps = 6;         // steps seen before the fit is trusted
  // The configured position cost: used while the steps seen cannot separate the two costs, and
  // with configured_budget.
  double prior_position_cost = 0;
  int configured_budget = 0;  // > 0: the target is a ceiling over this budget (see the top)
  int first_budget = 0;       // > 0 (with configured_budget): the steps' budget until one is timed
  int min_budget = 16;
  int max_budget = 1 << 16;
};

// The options the engine runs with: `target_step_ms` as a ceiling over the configured budget and
// position cost, `first_budget` tokens a step until a step was timed.
CalibratorOptions ceiling_over(double target_step_ms, int configured_budget,
                               double configured_position_cost, int first_budget);

class StepBudgetCalibrator {
 public:
  explicit StepBudgetCalibrator(CalibratorOptions options);  // throws on a bad option
  void observe(int tokens, double positions, double ms);
  // Empty until min_steps steps were seen, or while the fit is degenerate (no time per token);
  // with a configured budget, the provisional ceiling before that (see the top).
  std::optional<StepCalibration> calibration() const;

 private:
  std::optional<StepCalibration> provisional() const;

  CalibratorOptions options_;
  int n_steps_ = 0;
  // Weighted normal equations of the fit over the features (1, tokens, positions).
  std::array<std::array<double, 3>, 3> xtx_{};
  std::array<double, 3> xty_{};
};

}  // namespace k25
