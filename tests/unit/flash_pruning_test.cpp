// R-PR3 levels: Level 1 rule (depth-scaled), Level 2 gate within the pruning ratio, and the
// Level 3 adaptive decision from the KV norm's change rate.
#include <gtest/gtest.h>

#include "flash/adaptive_pruning.h"
#include "flash/pruning_levels.h"
#include "model/kv_cache.h"

namespace k25 {
namespace {

ModelConfig shape(int n_layers) {
  ModelConfig c;
  c.n_vocab = 100;
  c.dim = 64;
  c.n_layers = n_layers;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.head_dim = 8;
  c.ffn_dim = 172;
  c.context_length = 512;
  return c;
}

Fingerprint short_request(std::string domain = "default") {
  Fingerprint fp;
  fp.prompt_tokens = 100;
  fp.response_tokens = 50;
  fp.domain = std::move(domain);
  fp.features = gate_features("hello there", 100, 50, 50);
  return fp;
}

TEST(RulePruning, BlockCountScalesWithDepth) {
  RuleOptions rule;
  EXPECT_EQ(rule_ffn_blocks(rule, 40), 4);  // the note's 4 of 40
  EXPECT_EQ(rule_ffn_blocks(rule, 80), 8);
  EXPECT_EQ(rule_ffn_blocks(rule, 5), 1);
  EXPECT_EQ(rule_ffn_blocks(rule, 1), 0);
  rule.ffn_skip_fraction = 0;
  EXPECT_EQ(rule_ffn_blocks(rule, 40), 0);
}

TEST(RulePruning, OffByDefaultForAPlainModelOnWhenSwitchedOn) {
  const ModelConfig m = shape(40);
  PruningOptions opts;
  PruningPolicy plain(m, opts, nullptr);
  EXPECT_EQ(plain.decide(short_request(), false).level, 0);
  EXPECT_EQ(plain.decide(short_request(), false).plan, nullptr);
  EXPECT_TRUE(plain.knows_domain("default"));
  EXPECT_FALSE(plain.knows_domain("legal"));

  opts.rule.enabled = true;
  PruningPolicy rules(m, opts, nullptr);
  PlanDecision d = rules.decide(short_request(), false);
  ASSERT_NE(d.plan, nullptr);
  EXPECT_EQ(d.level, 1);
  EXPECT_EQ(d.plan->skipped_ffn_layers(), (std::vector<int>{36, 37, 38, 39}));
  EXPECT_TRUE(d.plan->skipped_attention_layers().empty());
  EXPECT_GT(d.compute_saved, 0.0);
  EXPECT_EQ(rules.decide(short_request(), true).plan, nullptr);  // "pruning": "off"
  Fingerprint longer = short_request();
  longer.prompt_tokens = 512;
  EXPECT_EQ(rules.decide(longer, false).level, 0);
  longer = short_request();
  longer.response_tokens = 128;
  EXPECT_EQ(rules.decide(longer, false).level, 0);
}

TEST(GatePruning, LowestScoresSwitchOffWithinTheRatio) {
  const ModelConfig m = shape(8);
  const ComputeCosts costs = compute_costs(m, 256);
  GateMlp gate = GateMlp::zero(kGateFeatures, 8, 8);
  for (int o = 0; o < gate.n_outputs(); ++o) gate.b2[o] = 3.0f;  // keep everything
  gate.b2[8 + 7] = -3.0f;                                        // FFN of block 7: skip
  gate.b2[8 + 6] = -2.0f;                                        // FFN of block 6: skip, less sure
  gate.b2[5] = -1.0f;  // attention of block 5: skip, least sure
  gate.head_off[2 * 8 + 1] = 1;
  const GateFeatures f = gate_features("x", 10, 10, 50);

  ComputePlan plan = ComputePlan::full(8, 8);
  apply_gate(gate, f, 1.0, costs, plan);
  EXPECT_EQ(plan.skipped_ffn_layers(), (std::vector<int>{6, 7}));
  EXPECT_EQ(plan.skipped_attention_layers(), (std::vector<int>{5}));
  EXPECT_FALSE(plan.head(2, 1));

  // A ratio that fits one FFN block only: the most confident one.
  const double one_ffn = costs.ffn / costs.total + 2 * costs.head_attention / costs.total;
  plan = ComputePlan::full(8, 8);
  apply_gate(gate, f, one_ffn, costs, plan);
  EXPECT_EQ(plan.skipped_ffn_layers(), (std::vector<int>{7}));
  EXPECT_LE(compute_saved(plan, costs), one_ffn);
}

TEST(ComputeCostsTest, SavedShareAddsUp) {
  const ModelConfig m = shape(4);
  const ComputeCosts c = compute_costs(m, 100);
  ComputePlan p = ComputePlan::full(4, 8);
  EXPECT_DOUBLE_EQ(compute_saved(p, c), 0.0);
  p.set_ffn(0, false);
  EXPECT_NEAR(compute_saved(p, c), c.ffn / c.total, 1e-12);
  p = ComputePlan::full(4, 8);
  p.set_attention(1, false);
  const double kept = compute_saved(p, c);
  p.keep_kv_of_skipped = false;
  EXPECT_NEAR(compute_saved(p, c) - kept, c.kv_projection / c.total, 1e-12);
}

// A cache whose keys have a chosen L2 norm per position.
void fill_keys(KvCache& kv, const ModelConfig& m, int n, const std::function<float(int)>& norm) {
  kv.reserve(0, n);
  std::vector<float> k(m.kv_dim()), v(m.kv_dim());
  for (int l = 0; l < m.n_layers; ++l) {
    for (int p = 0; p < n; ++p) {
      k[0] = norm(p);
      kv.store(0, l, p, k.data(), v.data(), m.kv_dim());
    }
  }
}

TEST(AdaptivePruning, StableNormSwitchesMoreOffChangingNormRestores) {
  const ModelConfig m = shape(8);
  AdaptivePruner pruner(m, AdaptiveOptions{});
  EXPECT_FALSE(pruner.due(31));
  EXPECT_TRUE(pruner.due(32));
  ContiguousKvCache kv(m.n_layers, m.kv_dim(), 512);
  ComputePlan base = ComputePlan::full(8, 8);
  base.set_ffn(7, false);
  base.set_attention(3, false);
  AdaptiveState state;

  fill_keys(kv, m, 64, [](int) { return 2.0f; });  // stable
  EXPECT_NEAR(pruner.norm_change_rate(kv, 0, 64, base), 0.0, 1e-9);
  auto plan = pruner.update(kv, 0, 64, base, 1.0, state);
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(state.shift, 1);
  EXPECT_EQ(plan->skipped_ffn_layers(), (std::vector<int>{6, 7}));
  plan = pruner.update(kv, 0, 64, base, 1.0, state);
  plan = pruner.update(kv, 0, 64, base, 1.0, state);
  EXPECT_EQ(state.shift, 2);  // at most 25% of 8 blocks beyond the base plan
  EXPECT_EQ(plan->skipped_ffn_layers(), (std::vector<int>{5, 6, 7}));

  fill_keys(kv, m, 96, [](int p) { return p < 64 ? 2.0f : 3.0f; });  // +50%: new content
  plan = pruner.update(kv, 0, 96, base, 1.0, state);
  EXPECT_EQ(state.shift, -1);
  EXPECT_GT(state.last_rate, 0.4);
  EXPECT_TRUE(plan->skipped_ffn_layers().empty());  // the base's FFN block is back
  plan = pruner.update(kv, 0, 96, base, 1.0, state);
  EXPECT_EQ(plan, nullptr);  // attention of block 3 back too (its K/V was kept): full
  plan = pruner.update(kv, 0, 96, base, 1.0, state);
  EXPECT_EQ(state.shift, -2);

  // Without kept K/V the attention block can never come back.
  base.keep_kv_of_skipped = false;
  AdaptiveState s2;
  s2.shift = -5;
  EXPECT_EQ(pruner.shifted(base, s2.shift, 1.0).skipped_attention_layers(), (std::vector<int>{3}));
  plan = pruner.update(kv, 0, 96, base, 1.0, s2);
  EXPECT_EQ(s2.shift, -1);
}

TEST(AdaptivePruning, ExtraBlocksStayWithinThePruningRatio) {
  const ModelConfig m = shape(8);
  AdaptivePruner pruner(m, AdaptiveOptions{});
  const ComputeCosts costs = compute_costs(m, kReferenceContext);
  ContiguousKvCache kv(m.n_layers, m.kv_dim(), 512);
  fill_keys(kv, m, 64, [](int) { return 2.0f; });  // stable: Level 3 wants more blocks off
  ComputePlan base = ComputePlan::full(8, 8);
  base.set_ffn(7, false);
  const double one_more = compute_saved(base, costs) + costs.ffn / costs.total;
  AdaptiveState state;
  for (int i = 0; i < 4; ++i) {
    auto plan = pruner.update(kv, 0, 64, base, one_more, state);
    ASSERT_NE(plan, nullptr);
    EXPECT_LE(compute_saved(*plan, costs), one_more + 1e-12);
    EXPECT_EQ(plan->skipped_ffn_layers(), (std::vector<int>{6, 7}));
  }
  EXPECT_EQ(state.shift, 1);
  // A ratio the base plan already fills: nothing more goes off.
  AdaptiveState full;
  auto plan = pruner.update(kv, 0, 64, base, compute_saved(base, costs), full);
  EXPECT_EQ(plan->skipped_ffn_layers(), (std::vector<int>{7}));
  EXPECT_EQ(full.shift, 0);
}

TEST(RulePruning, TheRuleStaysWithinTheRatio) {
  const ModelConfig m = shape(40);
  PruningOptions opts;
  opts.rule.enabled = true;
  const ComputeCosts costs = compute_costs(m, kReferenceContext);
  const double two_ffn = 2 * costs.ffn / costs.total;
  const PlanDecision d = plan_request(m, opts, costs, nullptr, two_ffn + 1e-6, short_request());
  ASSERT_NE(d.plan, nullptr);
  EXPECT_EQ(d.plan->skipped_ffn_layers(), (std::vector<int>{38, 39}));
  EXPECT_DOUBLE_EQ(d.max_saved, two_ffn + 1e-6);
  EXPECT_EQ(plan_request(m, opts, costs, nullptr, 0.0, short_request()).plan, nullptr);
}

TEST(AdaptivePruning, TooFewPositionsKeepTheBasePlan) {
  const ModelConfig m = shape(4);
  AdaptivePruner pruner(m, AdaptiveOptions{});
  ContiguousKvCache kv(m.n_layers, m.kv_dim(), 512);
  fill_keys(kv, m, 40, [](int) { return 1.0f; });
  AdaptiveState state;
  ComputePlan base = ComputePlan::full(4, 8);
  EXPECT_EQ(pruner.update(kv, 0, 40, base, 1.0, state), nullptr);
  EXPECT_EQ(state.decisions, 0);
}

}  // namespace
}  // namespace k25
