// The response's flash object reads what a plan skips back from the engine's description of it.
#include "server/plan_text.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "model/compute_plan.h"

namespace k25 {
namespace {

TEST(PlanText, ReadsBackWhatComputePlanDescribes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    ComputePlan plan = ComputePlan::full(12, 70);  // two words of head bits per layer
    for (int l = 0; l < 12; ++l) {
      if (rng() % 4 == 0) plan.set_attention(l, false);
      if (rng() % 4 == 0) plan.set_ffn(l, false);
      for (int h = 0; h < 70; ++h) {
        if (rng() % 30 == 0) plan.set_head(l, h, false);
      }
    }
    const PlanSkips skips = parse_plan_text(plan.describe());
    EXPECT_EQ(skips.attention_off, plan.skipped_attention_layers()) << plan.describe();
    EXPECT_EQ(skips.ffn_off, plan.skipped_ffn_layers()) << plan.describe();
    EXPECT_EQ(skips.heads_off, plan.skipped_head_list()) << plan.describe();
    EXPECT_EQ(skips.skipped_blocks(), plan.skipped_blocks());
  }
  EXPECT_EQ(parse_plan_text("full").skipped_blocks(), 0);
}

TEST(PlanText, RefusesWhatIsNotAPlan) {
  for (const char* bad : {"ffn-off[4", "ffn-off[x]", "bogus[1]", "heads-off[2]", "attn-off[-1]"}) {
    EXPECT_THROW(parse_plan_text(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace k25
