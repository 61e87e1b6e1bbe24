#include "engine/step_budget_calibrator.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace k25 {

namespace {

// Solves the n x n system a x = b (n <= 3) by Gaussian elimination with partial pivoting; false
// when it is (nearly) singular relative to its own scale.
template <size_t N>
bool solve(std::array<std::array<double, N>, N> a, std::array<double, N> b,
           std::array<double, N>& x) {
  double scale = 0;
  for (size_t i = 0; i < N; ++i) scale = std::max(scale, std::abs(a[i][i]));
  if (scale == 0) return false;
  for (size_t col = 0; col < N; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < N; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) < 1e-12 * scale) return false;
    std::swap(a[pivot], a[col]);
    std::swap(b[pivot], b[col]);
    for (size_t r = col + 1; r < N; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t c = col; c < N; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  for (size_t i = N; i-- > 0;) {
    double v = b[i];
    for (size_t c = i + 1; c < N; ++c) v -= a[i][c] * x[c];
    x[i] = v / a[i][i];
  }
  return true;
}

}  // namespace

CalibratorOptions ceiling_over(double target_step_ms, int configured_budget,
                               double configured_position_cost, int first_budget) {
  CalibratorOptions c;
  c.target_step_ms = target_step_ms;
  c.prior_position_cost = configured_position_cost;
  c.configured_budget = configured_budget;
  c.first_budget = first_budget;
  return c;
}

StepBudgetCalibrator::StepBudgetCalibrator(CalibratorOptions options) : options_(options) {
  if (!(options_.target_step_ms > 0)) fail("calibrator: target_step_ms must be > 0");
  if (!(options_.forgetting > 0 && options_.forgetting <= 1))
    fail("calibrator: forgetting must be in (0, 1]");
  if (options_.min_budget < 1 || options_.max_budget < options_.min_budget)
    fail("calibrator: need 1 <= min_budget <= max_budget");
  if (!(options_.prior_position_cost >= 0)) fail("calibrator: prior_position_cost must be >= 0");
  if (options_.configured_budget < 0) fail("calibrator: configured_budget must be >= 0");
  if (options_.first_budget < 0) fail("calibrator: first_budget must be >= 0");
}

void StepBudgetCalibrator::observe(int tokens, double positions, double ms) {
  if (tokens <= 0 || !(ms >= 0) || !(positions >= 0)) return;
  const std::array<double, 3> x = {1.0, double(tokens), positions};
  for (auto& row : xtx_)
    for (double& v : row) v *= options_.forgetting;
  for (double& v : xty_) v *= options_.forgetting;
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = 0; j < 3; ++j) xtx_[i][j] += x[i] * x[j];
    xty_[i] += x[i] * ms;
  }
  ++n_steps_;
}

std::optional<StepCalibration> StepBudgetCalibrator::provisional() const {
  if (options_.configured_budget <= 0) return std::nullopt;
  StepCalibration c;
  c.position_cost = options_.prior_position_cost;
  if (n_steps_ == 0) {
    if (options_.first_budget <= 0) return std::nullopt;
    c.step_token_budget = std::min(options_.first_budget, options_.configured_budget);
    return c;
  }
  // ms per unit of step cost (a token at position p is 1 + prior * p units), from the weighted
  // sums of the steps seen: xty_[0] is their time, xtx_[0][1] their tokens, xtx_[0][2] positions.
  const double units = xtx_[0][1] + options_.prior_position_cost * xtx_[0][2];
  if (!(units > 0) || !(xty_[0] > 0)) return std::nullopt;
  c.per_token_ms = xty_[0] / units;
  const double budget = options_.target_step_ms / c.per_token_ms;
  c.step_token_budget = static_cast<int>(
      std::clamp(budget, double(std::min(options_.min_budget, options_.configured_budget)),
                 double(options_.configured_budget)));
  return c;
}

std::optional<StepCalibration> StepBudgetCalibrator::calibration() const {
  if (n_steps_ < options_.min_steps) return provisional();
  StepCalibration c;
  std::array<double, 3> full{};
  if (solve<3>(xtx_, xty_, full) && full[1] > 0 && full[2] >= 0 && full[0] >= 0) {
    c.fixed_ms = full[0];
    c.per_token_ms = full[1];
    c.position_cost = full[2] / full[1];
  } else {
    // The steps seen do not tell token and position costs apart (say, decode only, or one
    // prompt): fit fixed + per-token time over the prior's cost instead.
    const double pc = options_.prior_position_cost;
    // Features (1, tokens + pc * positions) from the same sums.
    const std::array<std::array<double, 2>, 2> a = {
        {{xtx_[0][0], xtx_[0][1] + pc * xtx_[0][2]},
         {xtx_[0][1] + pc * xtx_[0][2], xtx_[1][1] + 2 * pc * xtx_[1][2] + pc * pc * xtx_[2][2]}}};
    const std::array<double, 2> b = {xty_[0], xty_[1] + pc * xty_[2]};
    std::array<double, 2> two{};
    if (!solve<2>(a, b, two) || !(two[1] > 0)) return std::nullopt;
    c.fixed_ms = std::max(0.0, two[0]);
    c.per_token_ms = two[1];
    c.position_cost = pc;
  }
  if (options_.configured_budget > 0) {
    // A step filled to the configured budget, with the steps' mean position per token r, holds
    // budget / (1 + prior * r) tokens, each costing per_token * (1 + position_cost * r).
    const double r = xtx_[0][2] / xtx_[0][1];
    const double tokens = options_.configured_budget / (1 + options_.prior_position_cost * r);
    const double ms = c.fixed_ms + c.per_token_ms * (1 + c.position_cost * r) * tokens;
    if (ms <= options_.target_step_ms) {
      c.step_token_budget = options_.configured_budget;
      c.position_cost = options_.prior_position_cost;
      return c;
    }
  }
  const double budget = (options_.target_step_ms - c.fixed_ms) / c.per_token_ms;
  c.step_token_budget = static_cast<int>(
      std::clamp(budget, double(options_.min_budget), double(options_.max_budget)));
  return c;
}

}  // namespace k25
