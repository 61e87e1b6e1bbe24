// Batched generation on the real model: sequences that share forward calls (in any mix of
// prefill chunks and decode tokens) get exactly the tokens each gets alone.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "test_paths.h"
#include "token_collector.h"

namespace k25 {
namespace {

GenerationRequest greedy(const Model& model, const std::string& text, int max_tokens) {
  GenerationRequest r;
  r.prompt = model.tokenizer().encode(text, true, false);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

class EngineBatching : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineBatching, ConcurrentGreedyRequestsGiveTheTokensEachGivesAlone) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path(std::string("models/") + GetParam()));
  const std::vector<std::string> prompts = {
      "Once upon a time",
      "The little dog ran to the park and saw a big red ball. He",
      "Lily",
      "One day, a girl named Sue went to the beach with her mom. They played in the sand and",
      "Tom had a toy car.",
      "The sun was hot",
  };
  EngineOptions options;
  options.n_threads = 2;
  options.micro_task_tokens = 8;  // prompts arrive in several chunks, mixed with decode tokens
  options.step_token_budget = 24;
  std::vector<std::vector<TokenId>> alone;
  {
    Engine engine(*model, options);
    for (const std::string& p : prompts) {
      TokenCollector t;
      engine.submit(greedy(*model, p, 40), t.callback());
      alone.push_back(t.wait());
    }
  }
  Engine engine(*model, options);
  std::vector<TokenCollector> together(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(engine.submit(greedy(*model, prompts[i], 40), together[i].callback()).status,
              SubmitStatus::Accepted);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[i].wait(), alone[i]) << "prompt " << i << ": " << prompts[i];
  }
  EXPECT_LT(engine.stats().forward_calls.load(), 6u * 40u);  // they really shared steps
}

// Issue 16: requests of 8 different compute plans decode in shared forward calls (one per step,
// not one per plan) and each gets the tokens it gets alone.
TEST(EngineMixedPlans, EightPlansShareEachStepAndKeepTheirTokens) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const ModelConfig& c = model->config();
  std::vector<std::shared_ptr<ComputePlan>> plans;
  for (int i = 0; i < 8; ++i) {
    auto plan = std::make_shared<ComputePlan>(ComputePlan::full(c.n_layers, c.n_heads));
    if (i & 1) plan->set_ffn(c.n_layers - 1, false);
    if (i & 2) plan->set_head(1, i, false);
    if (i & 4) plan->set_attention(2, false);
    plans.push_back(i == 0 ? nullptr : plan);
  }
  const int max_tokens = 24;
  auto request = [&](int i) {
    GenerationRequest r = greedy(*model, "Once upon a time, there was a", max_tokens);
    r.ignore_eos = true;
    r.plan = plans[static_cast<size_t>(i)];
    return r;
  };
  EngineOptions options;
  options.n_threads = 2;
  std::vector<std::vector<TokenId>> alone;
  {
    Engine engine(*model, options);
    for (int i = 0; i < 8; ++i) {
      TokenCollector t;
      engine.submit(request(i), t.callback());
      alone.push_back(t.wait());
    }
  }
  options.debug_step_delay_ms = 5;  // all eight are queued before the first step ends
  Engine engine(*model, options);
  std::vector<TokenCollector> together(8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(engine.submit(request(i), together[i].callback()).status, SubmitStatus::Accepted);
  }
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(together[i].wait(), alone[i]) << "plan " << i;
  }
  // One call per step: the 8 requests' 24 tokens in about 24 steps, not 8 x 24 calls.
  EXPECT_LE(engine.stats().forward_calls.load(), 2u * max_tokens);
}

TEST(EngineAdaptivePruning, Level3AdaptsEvery32TokensAndIsDeterministic) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const ModelConfig& c = model->config();
  auto plan = std::make_shared<ComputePlan>(ComputePlan::full(c.n_layers, c.n_heads));
  plan->set_ffn(c.n_layers - 1, false);
  auto run = [&](bool adaptive) {
    EngineOptions options;
    options.n_threads = 2;
    Engine engine(*model, options);
    GenerationRequest r = greedy(*model, "Once upon a time", 100);
    r.ignore_eos = true;
    r.plan = plan;
    r.adaptive_pruning = adaptive;
    r.max_compute_saved = 0.5;
    TokenCollector t;
    engine.submit(r, t.callback());
    std::vector<TokenId> tokens = t.wait();
    return std::make_pair(tokens, engine.stats().adaptive_updates.load());
  };
  const auto [first, updates] = run(true);
  EXPECT_EQ(first.size(), 100u);
  EXPECT_EQ(updates, 3u);  // after tokens 32, 64 and 96
  EXPECT_EQ(run(true).first, first);
  const auto [fixed, no_updates] = run(false);
  EXPECT_EQ(no_updates, 0u);
  EXPECT_EQ(run(false).first, fixed);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineBatching,
                         ::testing::Values("stories260K.gguf", "stories260K-q8_0.gguf",
                                           "stories260K-q4_0.gguf"));

}  // namespace
}  // namespace k25
