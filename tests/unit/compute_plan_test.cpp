// R-PR1: compute plans, and the forward pass under a plan really skipping work: a full plan is
// the unplanned forward bit for bit; skipped blocks change the output deterministically; a skipped
// attention block still writes its K/V when the plan keeps them.
#include "model/compute_plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "core/error.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

using testing::shared_path;

TEST(ComputePlan, SwitchesAndDescription) {
  ComputePlan p = ComputePlan::full(4, 70);  // two mask words per layer
  EXPECT_TRUE(p.is_full());
  EXPECT_EQ(p.describe(), "full");
  p.set_ffn(3, false);
  p.set_attention(1, false);
  p.set_head(2, 0, false);
  p.set_head(2, 65, false);
  p.set_head(1, 5, false);  // in a skipped block: not reported
  EXPECT_FALSE(p.is_full());
  EXPECT_EQ(p.skipped_blocks(), 2);
  EXPECT_EQ(p.skipped_heads(), 2);
  EXPECT_EQ(p.heads_on(2), 68);
  EXPECT_FALSE(p.head(2, 65));
  EXPECT_TRUE(p.head(2, 64));
  EXPECT_EQ(p.describe(), "attn-off[1] ffn-off[3] heads-off[2:0,65]");
  ComputePlan q = p;
  EXPECT_EQ(p, q);
  q.keep_kv_of_skipped = false;
  EXPECT_NE(p, q);
  q = p;
  q.set_head(2, 0, true);
  EXPECT_FALSE(p == q);
  EXPECT_THROW(check_plan_shape(p, 5, 70), Error);
  EXPECT_NO_THROW(check_plan_shape(p, 4, 70));
}

class PlannedForward : public ::testing::Test {
 protected:
  void SetUp() override {
    K25_REQUIRE_SHARED();
    model_ = Model::load(shared_path("models/stories260K.gguf"));
    ids_ = model_->tokenizer().encode("Lily and Ben went to the park to play", true, false);
  }
  // Logits of every prompt position, and the cache afterwards.
  std::vector<float> run(const ComputePlan* plan, std::unique_ptr<KvCache>* kv_out = nullptr) {
    const int n_vocab = model_->config().n_vocab;
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids_.size(); ++i) batch.push_back({ids_[i], int(i), 0, true});
    std::vector<float> logits(ids_.size() * n_vocab);
    auto kv = model_->make_kv_cache();
    model_->forward(batch, *kv, logits.data(), pool_, plan);
    if (kv_out) *kv_out = std::move(kv);
    return logits;
  }
  std::vector<float> keys(KvCache& kv, int layer) {
    const int kv_dim = model_->config().kv_dim();
    std::vector<float> out;
    std::vector<float> k(kv_dim);
    for (size_t p = 0; p < ids_.size(); ++p) {
      kv.load_key(0, layer, int(p), k.data(), kv_dim);
      out.insert(out.end(), k.begin(), k.end());
    }
    return out;
  }
  ComputePlan full() const {
    return ComputePlan::full(model_->config().n_layers, model_->config().n_heads);
  }

  std::unique_ptr<Model> model_;
  std::vector<TokenId> ids_;
  ThreadPool pool_{2};
};

TEST_F(PlannedForward, FullPlanEqualsUnplannedForwardBitForBit) {
  const std::vector<float> plain = run(nullptr);
  const ComputePlan plan = full();
  const std::vector<float> planned = run(&plan);
  ASSERT_EQ(plain.size(), planned.size());
  EXPECT_EQ(std::memcmp(plain.data(), planned.data(), plain.size() * sizeof(float)), 0);
}

TEST_F(PlannedForward, SkippedBlocksAndHeadsChangeTheOutputDeterministically) {
  const std::vector<float> plain = run(nullptr);
  const int last = model_->config().n_layers - 1;
  ComputePlan ffn_off = full();
  ffn_off.set_ffn(last, false);
  ComputePlan attn_off = full();
  attn_off.set_attention(1, false);
  ComputePlan head_off = full();
  head_off.set_head(1, 2, false);
  std::set<std::vector<float>> distinct = {plain};
  for (const ComputePlan* plan : {&ffn_off, &attn_off, &head_off}) {
    const std::vector<float> a = run(plan), b = run(plan);
    EXPECT_EQ(a, b) << plan->describe();
    EXPECT_NE(a, plain) << plan->describe();
    distinct.insert(a);
  }
  EXPECT_EQ(distinct.size(), 4u);
}

TEST_F(PlannedForward, AllHeadsMaskedEqualsAttentionOff) {
  ComputePlan heads = full(), attn = full();
  for (int h = 0; h < model_->config().n_heads; ++h) heads.set_head(2, h, false);
  attn.set_attention(2, false);
  EXPECT_EQ(run(&heads), run(&attn));
}

TEST_F(PlannedForward, SkippedAttentionKeepsItsKvWritesWhenAsked) {
  std::unique_ptr<KvCache> full_kv, kept_kv, dropped_kv;
  run(nullptr, &full_kv);
  ComputePlan plan = full();
  plan.set_attention(0, false);  // layer 0's K/V depend only on the embeddings
  run(&plan, &kept_kv);
  EXPECT_EQ(keys(*kept_kv, 0), keys(*full_kv, 0));
  plan.keep_kv_of_skipped = false;
  run(&plan, &dropped_kv);
  EXPECT_NE(keys(*dropped_kv, 0), keys(*full_kv, 0));
  // Skipping the last FFN changes no cached K/V (it only feeds the output head).
  ComputePlan ffn = full();
  ffn.set_ffn(model_->config().n_layers - 1, false);
  std::unique_ptr<KvCache> ffn_kv;
  run(&ffn, &ffn_kv);
  for (int l = 0; l < model_->config().n_layers; ++l)
    EXPECT_EQ(keys(*ffn_kv, l), keys(*full_kv, l));
}

// Issue 16: tokens of different plans in one forward call give, token for token and bit for bit,
// what each sequence gives alone under its own plan: prefill, the K/V written, and a decode step
// after it.
TEST_F(PlannedForward, MixedPlansInOneCallEqualEachPlanAlone) {
  const ModelConfig& c = model_->config();
  const int n_vocab = c.n_vocab, last = c.n_layers - 1;
  std::vector<ComputePlan> plans(8, full());
  plans[1].set_ffn(last, false);
  plans[2].set_attention(1, false);  // K/V kept
  plans[3].set_head(1, 2, false);
  plans[3].set_head(3, 0, false);
  plans[4].set_attention(2, false);
  plans[4].keep_kv_of_skipped = false;
  plans[5].set_ffn(0, false);
  plans[5].set_ffn(last, false);
  plans[5].set_head(2, 5, false);
  for (int h = 0; h < c.n_heads; ++h) plans[6].set_head(0, h, false);  // layer 0: all masked
  plans[7].set_attention(3, false);
  plans[7].set_ffn(3, false);
  // Sequence s: the prompt's first 4 + s tokens, then one decode token; plan 0 is the full one
  // (null for s == 0, the plan object for the others).
  const auto plan_of = [&](int s) -> const ComputePlan* { return s == 0 ? nullptr : &plans[s]; };
  const auto prompt_of = [&](int s) { return std::min<size_t>(ids_.size(), 4 + s); };
  const TokenId next = ids_.front();

  std::vector<std::vector<float>> alone_prefill, alone_decode;
  for (int s = 0; s < 8; ++s) {
    auto kv = model_->make_kv_cache();
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt_of(s); ++i) batch.push_back({ids_[i], int(i), s, true});
    std::vector<float> logits(batch.size() * n_vocab);
    model_->forward(batch, *kv, logits.data(), pool_, plan_of(s));
    alone_prefill.push_back(logits);
    std::vector<float> step(n_vocab);
    model_->forward({{next, int(prompt_of(s)), s, true}}, *kv, step.data(), pool_, plan_of(s));
    alone_decode.push_back(step);
  }

  auto kv = model_->make_kv_cache();
  std::vector<BatchToken> batch;
  std::vector<const ComputePlan*> row_plans;
  for (int s = 0; s < 8; ++s) {
    for (size_t i = 0; i < prompt_of(s); ++i) {
      batch.push_back({ids_[i], int(i), s, true});
      row_plans.push_back(plan_of(s));
    }
  }
  std::vector<float> logits(batch.size() * n_vocab);
  model_->forward_mixed(batch, *kv, logits.data(), pool_, row_plans);
  size_t row = 0;
  for (int s = 0; s < 8; ++s) {
    const std::vector<float> mixed(logits.begin() + row * n_vocab,
                                   logits.begin() + (row + prompt_of(s)) * n_vocab);
    EXPECT_EQ(mixed, alone_prefill[s]) << "prefill of sequence " << s;
    row += prompt_of(s);
  }
  batch.clear();
  row_plans.clear();
  for (int s = 0; s < 8; ++s) {
    batch.push_back({next, int(prompt_of(s)), s, true});
    row_plans.push_back(plan_of(s));
  }
  std::vector<float> step(8 * n_vocab);
  model_->forward_mixed(batch, *kv, step.data(), pool_, row_plans);
  for (int s = 0; s < 8; ++s) {
    EXPECT_EQ(std::vector<float>(step.begin() + s * n_vocab, step.begin() + (s + 1) * n_vocab),
              alone_decode[s])
        << "decode of sequence " << s << " (" << plans[s].describe() << ")";
  }
}

TEST_F(PlannedForward, WrongShapedPlanIsAnError) {
  const ComputePlan plan =
      ComputePlan::full(model_->config().n_layers + 1, model_->config().n_heads);
  EXPECT_THROW(run(&plan), Error);
}

}  // namespace
}  // namespace k25
