// OpenAI's sampling adjustments through the engine on the real model: a request with
// logit_bias and presence/frequency penalties gets the same tokens alone as in a batch with
// others (each sequence has its own sampler and its own counts).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "test_paths.h"
#include "token_collector.h"

namespace k25 {
namespace {

GenerationRequest request(const Model& model, const std::string& text, int variant) {
  GenerationRequest r;
  r.prompt = model.tokenizer().encode(text, true, false);
  r.max_tokens = 32;
  r.ignore_eos = true;
  r.sampling.temperature = variant % 2 == 0 ? 0.0f : 0.9f;
  r.sampling.seed = 100 + static_cast<uint64_t>(variant);
  r.sampling.presence_penalty = 0.5f * static_cast<float>(variant % 3);
  r.sampling.frequency_penalty = variant % 2 == 0 ? 1.0f : -0.5f;
  r.sampling.logit_bias = {{static_cast<TokenId>(10 + variant), 2.0f},
                           {static_cast<TokenId>(40 + variant), -100.0f}};
  return r;
}

TEST(EngineSampling, PenaltiesAndLogitBiasAreBatchInvariant) {
  ASSERT_TRUE(testing::shared_available()) << "../shared is missing (scripts/setup.sh)";
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran", "Lily",
                                            "Tom had a toy car."};
  EngineOptions options;
  options.n_threads = 1;
  std::vector<std::vector<TokenId>> alone;
  {
    Engine engine(*model, options);
    for (size_t i = 0; i < prompts.size(); ++i) {
      TokenCollector c;
      engine.submit(request(*model, prompts[i], static_cast<int>(i)), c.callback());
      alone.push_back(c.wait());
    }
  }
  Engine engine(*model, options);
  std::vector<TokenCollector> together(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(
        engine.submit(request(*model, prompts[i], static_cast<int>(i)), together[i].callback())
            .status,
        SubmitStatus::Accepted);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<TokenId> tokens = together[i].wait();
    EXPECT_EQ(tokens, alone[i]) << "prompt " << i;
    EXPECT_EQ(std::count(tokens.begin(), tokens.end(), static_cast<TokenId>(40 + i)), 0);
  }
}

}  // namespace
}  // namespace k25
