// OpenAI's sampling adjustments in the sampler: logit_bias, presence_penalty, frequency_penalty
// (counted over the tokens the sampler produced, never the prompt).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/error.h"
#include "model/sampler.h"

namespace k25 {
namespace {

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  p.seed = 7;
  return p;
}

SamplingParams unfiltered(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 99;
  return p;
}

const std::vector<float> kLogits = {0.5f, -1.0f, 4.0f, 3.0f, 1.0f};

TEST(SamplerOpenAi, LogitBiasPlus100ForcesAToken) {
  SamplingParams p = greedy();
  p.logit_bias = {{1, 100.0f}};
  Sampler sampler(p, 5);
  for (int i = 0; i < 5; ++i) {
    std::vector<float> logits = kLogits;
    EXPECT_EQ(sampler.sample(logits.data(), {}), 1);
  }
  // Also when sampling at a high temperature: exp(100) dwarfs the rest.
  p = unfiltered(1.0f);
  p.logit_bias = {{1, 100.0f}};
  Sampler hot(p, 5);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = kLogits;
    EXPECT_EQ(hot.sample(logits.data(), {}), 1);
  }
}

TEST(SamplerOpenAi, LogitBiasMinus100BansTheArgmax) {
  SamplingParams p = greedy();
  p.logit_bias = {{2, -100.0f}};
  Sampler sampler(p, 5);
  std::vector<float> logits = kLogits;
  EXPECT_EQ(sampler.sample(logits.data(), {}), 3);
  EXPECT_EQ(logits[2], -std::numeric_limits<float>::infinity());

  p = unfiltered(2.0f);
  p.logit_bias = {{2, -100.0f}};
  Sampler hot(p, 5);
  std::map<TokenId, int> counts;
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> copy = kLogits;
    ++counts[hot.sample(copy.data(), {})];
  }
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_GT(counts[3], 0);
}

TEST(SamplerOpenAi, SmallBiasesAreAdded) {
  SamplingParams p = greedy();
  p.logit_bias = {{3, 1.5f}, {0, -0.5f}};
  Sampler sampler(p, 5);
  std::vector<float> logits = kLogits;
  EXPECT_EQ(sampler.sample(logits.data(), {}), 3);  // 3.0 + 1.5 beats 4.0
  EXPECT_FLOAT_EQ(logits[3], 4.5f);
  EXPECT_FLOAT_EQ(logits[0], 0.0f);
  EXPECT_FLOAT_EQ(logits[2], 4.0f);
}

// mu[j] = c[j] - count[j] * frequency_penalty - (count[j] > 0) * presence_penalty.
TEST(SamplerOpenAi, PenaltiesFollowOpenAisFormula) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  Sampler sampler(p, 5);
  // Token 2 wins three times: 4.0, then 3.25, then 3.0 (a tie with token 3: lowest id wins).
  std::vector<TokenId> produced;
  std::vector<std::vector<float>> seen;
  for (int i = 0; i < 4; ++i) {
    std::vector<float> logits = kLogits;
    produced.push_back(sampler.sample(logits.data(), {}));
    seen.push_back(logits);
  }
  EXPECT_EQ(produced, (std::vector<TokenId>{2, 2, 2, 3}));
  EXPECT_FLOAT_EQ(seen[0][2], 4.0f);
  EXPECT_FLOAT_EQ(seen[1][2], 4.0f - 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(seen[2][2], 4.0f - 2 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(seen[3][2], 4.0f - 3 * 0.25f - 0.5f);
  EXPECT_FLOAT_EQ(seen[3][3], 3.0f);  // not produced yet: untouched
  EXPECT_FLOAT_EQ(seen[3][0], 0.5f);
}

TEST(SamplerOpenAi, PenaltiesIgnoreThePrompt) {
  SamplingParams p = greedy();
  p.presence_penalty = 2.0f;
  p.frequency_penalty = 2.0f;
  Sampler sampler(p, 5);
  std::vector<float> logits = kLogits;
  // The history (the prompt) is full of token 2, yet only produced tokens count.
  EXPECT_EQ(sampler.sample(logits.data(), {2, 2, 2, 2}), 2);
  EXPECT_FLOAT_EQ(logits[2], 4.0f);
}

TEST(SamplerOpenAi, NegativePenaltiesEncourageRepetition) {
  SamplingParams p = greedy();
  p.presence_penalty = -2.0f;
  Sampler sampler(p, 5);
  std::vector<float> logits = {4.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 0);
  logits = {4.0f, 0.0f, 0.0f, 0.0f, 5.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 0);  // 4 + 2 beats 5
}

// At temperature 1 the draws follow the softmax of the penalised logits.
TEST(SamplerOpenAi, PenalisedDistributionMatchesSoftmax) {
  SamplingParams p = unfiltered(1.0f);
  p.logit_bias = {{0, std::log(3.0f)}};  // token 0: weight 1 -> 3
  Sampler sampler(p, 2);
  constexpr int kDraws = 20000;
  int zeros = 0;
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> logits = {0.0f, 0.0f};
    if (sampler.sample(logits.data(), {}) == 0) ++zeros;
  }
  // Expected 0.75; the standard deviation of the share is about 0.003.
  EXPECT_NEAR(static_cast<double>(zeros) / kDraws, 0.75, 0.015);
}

TEST(SamplerOpenAi, RejectsBadParameters) {
  SamplingParams p = greedy();
  p.logit_bias = {{5, 1.0f}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias = {{0, std::nanf("")}};
  EXPECT_THROW(Sampler(p, 5), Error);
  p.logit_bias.clear();
  p.presence_penalty = std::numeric_limits<float>::infinity();
  EXPECT_THROW(Sampler(p, 5), Error);
}

// Anthropic's stop_sequence names the stop string that ended the output.
TEST(StopMatcherStop, ReportsWhichStopStringMatched) {
  StopMatcher matcher({"END", "fin", "zz"});
  StopMatcher::Result held = matcher.push("the fi");
  EXPECT_FALSE(held.stopped);
  EXPECT_TRUE(held.stop.empty());
  EXPECT_EQ(held.emit, "the ");  // "fi" may become "fin": held back
  StopMatcher::Result r = matcher.push("n and END");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop, "fin");  // the earliest in the text, not the first listed
  EXPECT_EQ(r.emit, "");
}

}  // namespace
}  // namespace k25
