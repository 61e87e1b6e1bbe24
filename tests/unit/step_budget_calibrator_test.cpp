#include "engine/step_budget_calibrator.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

namespace k25 {
namespace {

CalibratorOptions target(double ms) {
  CalibratorOptions o;
  o.target_step_ms = ms;
  return o;
}

// A machine whose step takes fixed + per_token * tokens + per_position * positions ms, fed a
// serving-like mix: decode steps of a few sequences deep in their context, and prefill steps.
void serve(StepBudgetCalibrator& c, double fixed, double per_token, double per_position, int steps,
           uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < steps; ++i) {
    const int batch = 1 + static_cast<int>(rng() % 8);
    const int context = static_cast<int>(rng() % 3000);
    int tokens = batch;
    double positions = double{1.0} * batch * context;
    if (rng() % 2) {  // a prefill chunk from the start of a prompt rides along
      const int chunk = 16 + static_cast<int>(rng() % 400);
      tokens += chunk;
      positions += double{1.0} * chunk * (chunk - 1) / 2;
    }
    c.observe(tokens, positions, fixed + per_token * tokens + per_position * positions);
  }
}

TEST(StepBudgetCalibrator, NothingUntilEnoughSteps) {
  StepBudgetCalibrator c(target(250));
  serve(c, 20, 0.5, 1e-3, 5, 1);
  EXPECT_FALSE(c.calibration().has_value());
  serve(c, 20, 0.5, 1e-3, 1, 2);
  EXPECT_TRUE(c.calibration().has_value());
}

TEST(StepBudgetCalibrator, RecoversTheMachinesCostsAndTheBudgetForTheTarget) {
  StepBudgetCalibrator c(target(250));
  serve(c, 20, 0.5, 1e-3, 200, 3);
  const auto cal = c.calibration();
  ASSERT_TRUE(cal.has_value());
  EXPECT_NEAR(cal->fixed_ms, 20, 1e-3);
  EXPECT_NEAR(cal->per_token_ms, 0.5, 1e-6);
  EXPECT_NEAR(cal->position_cost, 2e-3, 1e-8);
  EXPECT_NEAR(cal->step_token_budget, 460, 1);  // (250 - 20) / 0.5
}

TEST(StepBudgetCalibrator, FollowsAMachineThatSlowsDown) {
  StepBudgetCalibrator c(target(250));
  serve(c, 20, 0.5, 1e-3, 100, 4);
  serve(c, 40, 1.0, 2e-3, 300, 5);  // twice as slow (other load, a lower clock)
  const auto cal = c.calibration();
  ASSERT_TRUE(cal.has_value());
  EXPECT_NEAR(cal->per_token_ms, 1.0, 1e-3);
  EXPECT_NEAR(cal->step_token_budget, 210, 1);
}

TEST(StepBudgetCalibrator, DecodeOnlyStepsKeepThePriorPositionCost) {
  CalibratorOptions o = target(100);
  o.prior_position_cost = 0.01;
  StepBudgetCalibrator c(o);
  // One sequence decoding: positions grow with the step count, tokens stay 1, so the token and
  // the position columns cannot be told apart from the constant.
  for (int i = 0; i < 50; ++i) c.observe(1, 1000 + i, 10 + 0.2 * (1 + 0.01 * (1000 + i)));
  const auto cal = c.calibration();
  ASSERT_TRUE(cal.has_value());
  EXPECT_DOUBLE_EQ(cal->position_cost, 0.01);
  EXPECT_GT(cal->step_token_budget, 0);
}

TEST(StepBudgetCalibrator, TheBudgetStaysWithinItsBounds) {
  CalibratorOptions o = target(5);
  o.min_budget = 32;
  StepBudgetCalibrator slow(o);
  serve(slow, 20, 0.5, 1e-3, 50, 6);  // the fixed cost alone exceeds the target
  ASSERT_TRUE(slow.calibration().has_value());
  EXPECT_EQ(slow.calibration()->step_token_budget, 32);
}

// With a configured budget the target is a ceiling: a machine fast enough for the configured
// step keeps it (and its position cost), a slower one gets the measured budget.
TEST(StepBudgetCalibrator, AConfiguredBudgetStaysWhileItsStepsFitTheTarget) {
  CalibratorOptions o = target(150);
  o.configured_budget = 512;
  o.prior_position_cost = 0.0014;
  StepBudgetCalibrator fast(o);
  serve(fast, 5, 0.1, 1e-4, 200, 7);  // a full step: at most 5 + 0.1 * 512 = 56 ms
  ASSERT_TRUE(fast.calibration().has_value());
  EXPECT_EQ(fast.calibration()->step_token_budget, 512);
  EXPECT_DOUBLE_EQ(fast.calibration()->position_cost, 0.0014);

  StepBudgetCalibrator slow(o);
  serve(slow, 20, 0.5, 1e-3, 200, 8);  // 512 tokens at position 0 alone take 276 ms
  const auto cal = slow.calibration();
  ASSERT_TRUE(cal.has_value());
  EXPECT_NEAR(cal->step_token_budget, 260, 1);  // (150 - 20) / 0.5
  EXPECT_NEAR(cal->position_cost, 2e-3, 1e-8);
}

// Before the fit is trusted, the ceiling over a configured budget is provisional: the first
// steps hold first_budget, the next ones the target over the time per unit of step cost seen so
// far (fixed part included), never more than the configured budget.
TEST(StepBudgetCalibrator, AConfiguredBudgetIsCappedProvisionallyUntilTheFitIsTrusted) {
  const CalibratorOptions o = ceiling_over(150, 512, 0.0014, 128);
  StepBudgetCalibrator slow(o);
  ASSERT_TRUE(slow.calibration().has_value());
  EXPECT_EQ(slow.calibration()->step_token_budget, 128);
  EXPECT_DOUBLE_EQ(slow.calibration()->position_cost, 0.0014);
  // 128 tokens from position 0 (8128 positions, 139.4 units) in 128 ms: 0.918 ms a unit.
  slow.observe(128, 8128, 128);
  ASSERT_TRUE(slow.calibration().has_value());
  EXPECT_NEAR(slow.calibration()->step_token_budget, 163, 1);  // 150 / 0.918
  EXPECT_DOUBLE_EQ(slow.calibration()->position_cost, 0.0014);

  StepBudgetCalibrator fast(o);
  fast.observe(128, 8128, 10);  // a 512-token step would take ~40 ms: the configured one stays
  ASSERT_TRUE(fast.calibration().has_value());
  EXPECT_EQ(fast.calibration()->step_token_budget, 512);

  // Without first_budget nothing is known before a step; without a configured budget there is
  // no ceiling to cap before the fit.
  EXPECT_FALSE(StepBudgetCalibrator(ceiling_over(150, 512, 0.0014, 0)).calibration());
  StepBudgetCalibrator pure(target(150));
  pure.observe(128, 8128, 128);
  EXPECT_FALSE(pure.calibration().has_value());
}

TEST(StepBudgetCalibrator, IgnoresEmptyStepsAndRejectsBadOptions) {
  StepBudgetCalibrator c(target(250));
  for (int i = 0; i < 20; ++i) c.observe(0, 0, 5);
  EXPECT_FALSE(c.calibration().has_value());
  EXPECT_THROW(StepBudgetCalibrator{target(0)}, Error);
  CalibratorOptions bad = target(100);
  bad.forgetting = 0;
  EXPECT_THROW(StepBudgetCalibrator{bad}, Error);
  CalibratorOptions negative = target(100);
  negative.configured_budget = -1;
  EXPECT_THROW(StepBudgetCalibrator{negative}, Error);
}

}  // namespace
}  // namespace k25
