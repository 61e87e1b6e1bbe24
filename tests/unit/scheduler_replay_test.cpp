#include "engine/scheduler_replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace k25 {
namespace {

// A fixed budget of 512 tokens, position cost 0, steps of 2 ms + 1 ms per token.
ReplayOptions fixed_budget() {
  ReplayOptions o;
  o.scheduler.step_token_budget = 512;
  o.scheduler.micro_task_tokens = 512;
  o.cost = {2, 1, 0};
  o.target_step_ms = 0;
  return o;
}

TEST(SchedulerReplay, LonePromptTakesItsStepsInModelledTime) {
  const ReplayResult r = replay_schedule({{0, 50, 1000, 4}}, fixed_budget());
  ASSERT_EQ(r.requests.size(), 1u);
  // 512 + 488 prompt tokens in two steps, then 3 decode steps of one token.
  EXPECT_NEAR(r.requests[0].ttft_s(), (2 + 512 + 2 + 488) / 1000.0, 1e-9);
  EXPECT_NEAR(r.requests[0].finished_s, (2 + 512 + 2 + 488 + 3 * 3) / 1000.0, 1e-9);
  EXPECT_EQ(r.steps, 5);
  EXPECT_EQ(r.prefilled[0], std::vector<int>{0});
  EXPECT_TRUE(r.prefilled[2].empty());
}

TEST(SchedulerReplay, ClosedLoopSendsTheNextRequestAsOneFinishes) {
  ReplayOptions o = fixed_budget();
  o.concurrency = 2;
  const ReplayResult r = replay_schedule({{0, 50, 10, 2}, {0, 50, 300, 2}, {0, 50, 10, 2}}, o);
  EXPECT_EQ(r.requests[0].sent_s, 0);
  EXPECT_EQ(r.requests[1].sent_s, 0);
  const double first_done = std::min(r.requests[0].finished_s, r.requests[1].finished_s);
  EXPECT_GT(first_done, 0);
  EXPECT_EQ(r.requests[2].sent_s, first_done);
  EXPECT_GT(r.requests[2].first_token_s, first_done);
}

TEST(SchedulerReplay, OpenLoopWaitsForArrivals) {
  const ReplayResult r = replay_schedule({{5.0, 10, 100, 1}, {0.5, 100, 100, 1}}, fixed_budget());
  EXPECT_EQ(r.requests[1].sent_s, 0.5);
  EXPECT_EQ(r.requests[0].sent_s, 5.0);
  // Each alone: one step of 2 + 100 ms gives its only token.
  EXPECT_NEAR(r.requests[1].ttft_s(), 0.102, 1e-9);
  EXPECT_NEAR(r.requests[0].ttft_s(), 0.102, 1e-9);
  EXPECT_NEAR(r.requests[0].finished_s, 5.102, 1e-9);
}

TEST(SchedulerReplay, TargetStepTimeBoundsTheStepsOnceMeasured) {
  ReplayOptions o = fixed_budget();
  o.target_step_ms = 100;  // the calibrator's budget: about (100 - 2) / 1 = 98 tokens a step
  o.scheduler.micro_task_tokens = 64;
  // Prompts of different lengths decoding beside each other give steps of many sizes to fit.
  const ReplayResult r =
      replay_schedule({{0, 50, 3000, 40}, {0, 50, 700, 40}, {0, 50, 90, 40}, {0, 50, 1500, 40}}, o);
  ASSERT_GT(r.step_ms.size(), 40u);
  EXPECT_DOUBLE_EQ(r.step_ms[0], 2 + 64);  // one micro-task until a step was timed
  for (size_t i = 1; i < r.step_ms.size(); ++i) EXPECT_LE(r.step_ms[i], 101) << "step " << i;
}

// Four bronze prompts of 6000 tokens sent together, about 6 s of prefill each: the waiting ones
// age past the started one's lead after 4 s, and it takes their turns, so the first tokens come
// one prefill apart; prefilled in turns, all four came within a few steps of each other at ~24 s.
TEST(SchedulerReplay, LongPromptsOfOneClassFinishOneAfterAnother) {
  std::vector<ReplayRequest> prompts(4, {0, 10, 6000, 2});
  const ReplayResult r = replay_schedule(prompts, fixed_budget());
  std::vector<double> first;
  for (const ReplayOutcome& o : r.requests) first.push_back(o.first_token_s);
  std::sort(first.begin(), first.end());
  EXPECT_LT(first[0], 6.5);
  for (size_t i = 1; i < first.size(); ++i) EXPECT_GT(first[i] - first[i - 1], 5.5) << i;
}

// A gold prompt arriving when two bronze ones have waited 10 s (110 points against its 100):
// the started bronze prompt takes the aged one's turn once, the aged one counts as served, and
// the gold prompt goes next (3000 tokens, about 3.1 s of prefill), not after the bronze prompt.
TEST(SchedulerReplay, AGoldPromptGoesNextAfterTheTurnAnAgedClassEarned) {
  std::vector<ReplayRequest> prompts(3, {0, 10, 6000, 2});
  prompts.push_back({10.0, 100, 3000, 2});
  const ReplayResult r = replay_schedule(prompts, fixed_budget());
  EXPECT_LT(r.requests[3].ttft_s(), 4.2);
}

TEST(SchedulerReplay, RefusesAnEmptyOrTokenlessWorkload) {
  EXPECT_THROW(replay_schedule({}, fixed_budget()), Error);
  EXPECT_THROW(replay_schedule({{0, 50, 0, 1}}, fixed_budget()), Error);
  EXPECT_THROW(replay_schedule({{0, 50, 5, 0}}, fixed_budget()), Error);
}

}  // namespace
}  // namespace k25
