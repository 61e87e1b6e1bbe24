#include "model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace k25 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Parameters with every filter off, so a test switches on only what it checks.
SamplingParams plain(float temperature, uint64_t seed = 1234) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

// Samples `draws` times from the same logits (copied each time, since sample may modify them)
// and counts how often each token came out.
std::map<TokenId, int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::map<TokenId, int> counts;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> copy = logits;
    ++counts[sampler.sample(copy.data(), {})];
  }
  return counts;
}

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

std::vector<float> random_logits(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

TEST(Sampler, GreedyPicksArgmax) {
  Sampler sampler(plain(0.0f), 5);
  std::vector<float> logits = {0.1f, -2.0f, 3.5f, 3.4f, 1.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 2);
}

TEST(Sampler, GreedyTieGoesToLowestId) {
  Sampler sampler(plain(0.0f), 6);
  std::vector<float> logits = {1.0f, 7.0f, 2.0f, 7.0f, 7.0f, 0.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 1);
}

TEST(Sampler, GreedyIgnoresNan) {
  Sampler sampler(plain(0.0f), 3);
  std::vector<float> logits = {std::nanf(""), 1.0f, 2.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 2);
}

TEST(Sampler, NegativeTemperatureIsGreedy) {
  Sampler sampler(plain(-1.0f), 4);
  std::vector<float> logits = {0.0f, 0.5f, 0.4f, 0.49f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 1);
}

TEST(Sampler, TopKOneEqualsGreedyAtAnyTemperature) {
  const std::vector<float> base = random_logits(1000, 7);
  Sampler greedy(plain(0.0f), 1000);
  std::vector<float> copy = base;
  const TokenId expected = greedy.sample(copy.data(), {});
  for (float temperature : {0.1f, 1.0f, 5.0f, 100.0f}) {
    SamplingParams p = plain(temperature);
    p.top_k = 1;
    Sampler sampler(p, 1000);
    for (int i = 0; i < 50; ++i) {
      copy = base;
      EXPECT_EQ(sampler.sample(copy.data(), {}), expected) << "temperature " << temperature;
    }
  }
}

TEST(Sampler, TopKOneBreaksTiesLikeGreedy) {
  SamplingParams p = plain(1.0f);
  p.top_k = 1;
  Sampler sampler(p, 4);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
    EXPECT_EQ(sampler.sample(logits.data(), {}), 1);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  const std::vector<float> base = random_logits(5000, 11);
  SamplingParams p = plain(1.0f, 42);
  p.top_k = 50;
  p.top_p = 0.9f;
  p.min_p = 0.01f;
  Sampler a(p, 5000);
  Sampler b(p, 5000);
  std::vector<TokenId> seq_a, seq_b;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> copy_a = base, copy_b = base;
    seq_a.push_back(a.sample(copy_a.data(), {}));
    seq_b.push_back(b.sample(copy_b.data(), {}));
  }
  EXPECT_EQ(seq_a, seq_b);
  // The draws are really random: a seeded run visits more than one token.
  EXPECT_GT(histogram(a, base, 200).size(), 1u);
}

TEST(Sampler, DifferentSeedsDiverge) {
  const std::vector<float> base(100, 0.0f);  // uniform over 100 tokens
  Sampler a(plain(1.0f, 1), 100);
  Sampler b(plain(1.0f, 2), 100);
  std::vector<TokenId> seq_a, seq_b;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> copy_a = base, copy_b = base;
    seq_a.push_back(a.sample(copy_a.data(), {}));
    seq_b.push_back(b.sample(copy_b.data(), {}));
  }
  EXPECT_NE(seq_a, seq_b);
}

TEST(Sampler, FrequenciesMatchSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double expected[3] = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z};
  Sampler sampler(plain(1.0f, 2024), 3);
  const int draws = 20000;
  const auto counts = histogram(sampler, logits, draws);
  for (TokenId t = 0; t < 3; ++t) {
    const double freq = counts.count(t) ? counts.at(t) / static_cast<double>(draws) : 0.0;
    EXPECT_NEAR(freq, expected[t], 0.02) << "token " << t;
  }
}

TEST(Sampler, TemperatureSharpensDistribution) {
  // logits {0, ln 2}: at T=1 the odds are 1:2, at T=0.5 they are 1:4.
  const std::vector<float> logits = {0.0f, static_cast<float>(std::log(2.0))};
  Sampler sampler(plain(0.5f, 99), 2);
  const int draws = 20000;
  const auto counts = histogram(sampler, logits, draws);
  EXPECT_NEAR(counts.at(1) / static_cast<double>(draws), 0.8, 0.02);
}

TEST(Sampler, TopKLimitsToBestTokens) {
  SamplingParams p = plain(1.0f, 5);
  p.top_k = 2;
  Sampler sampler(p, 5);
  // Tokens 3 and 0 are the best two; the others are close enough to be drawn without top-k.
  const auto counts = histogram(sampler, {2.0f, 1.5f, 1.0f, 2.2f, 1.9f}, 3000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(3));
  EXPECT_TRUE(counts.count(0));
}

// A large vocabulary of ties (13 distinct logits) with NaNs among them: top-k keeps the k best by
// logit, the lowest ids among equals, and never a NaN, wherever they stand in the vocabulary.
TEST(Sampler, TopKOfManyTiesKeepsTheLowestIdsOfTheBestLogit) {
  constexpr int kVocab = 5000, kTopK = 40;
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) logits[i] = static_cast<float>((i * 7919) % 13);
  for (int i = 0; i < kVocab; i += 97) logits[i] = std::nanf("");
  std::vector<TokenId> best;  // ids of logit 12 in rising order, NaNs left out
  for (int i = 0; i < kVocab && static_cast<int>(best.size()) < kTopK; ++i) {
    if (logits[i] == 12.0f) best.push_back(i);
  }
  SamplingParams p = plain(1.0f, 41);
  p.top_k = kTopK;
  Sampler sampler(p, kVocab);
  const auto counts = histogram(sampler, logits, 4000);
  std::vector<TokenId> drawn;
  for (const auto& [token, count] : counts) drawn.push_back(token);
  EXPECT_EQ(drawn, best);  // each of the 40 equal tokens has 1/40: all of them come out
}

// With a k of 3 the k best of a large vocabulary are each drawn about a third of the time,
// wherever they stand: in the first logits, inside later stretches the scan may pass over, in
// the last few that fit no stretch, and next to logits that almost beat them.
TEST(Sampler, TopKFindsTheBestWhereverTheyStand) {
  constexpr int kVocab = 64 * 50 + 7;
  for (const std::vector<int>& places :
       {std::vector<int>{0, 1, 2}, {70, 2000, kVocab - 1}, {63, 64, kVocab - 7}, {3199, 3200, 5}}) {
    std::vector<float> logits = random_logits(kVocab, 99);
    for (float& l : logits) l = std::min(l, 10.0f);
    for (size_t r = 0; r < places.size(); ++r) logits[places[r]] = 20.0f + 0.01f * r;
    logits[places[0] + (places[0] + 1 < kVocab ? 1 : -1)] =
        std::max(logits[places[0] + (places[0] + 1 < kVocab ? 1 : -1)], 19.99f);  // almost the best
    SamplingParams p = plain(1.0f, 17);
    p.top_k = 3;
    Sampler sampler(p, kVocab);
    const auto counts = histogram(sampler, logits, 3000);
    std::vector<TokenId> drawn;
    for (const auto& [token, count] : counts) drawn.push_back(token);
    std::vector<TokenId> want(places.begin(), places.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(drawn, want);
  }
}

TEST(Sampler, TopPKeepsSmallestPrefix) {
  // Sorted probabilities 0.5, 0.3, 0.15, 0.05 scattered over ids; top_p 0.75 keeps {0.5, 0.3}.
  const std::vector<float> logits = logits_for({0.15, 0.5, 0.05, 0.3});
  SamplingParams p = plain(1.0f, 17);
  p.top_p = 0.75f;
  Sampler sampler(p, 4);
  const int draws = 10000;
  const auto counts = histogram(sampler, logits, draws);
  EXPECT_FALSE(counts.count(0)) << "p=0.15 must be cut by top_p";
  EXPECT_FALSE(counts.count(2)) << "p=0.05 must be cut by top_p";
  ASSERT_TRUE(counts.count(1));
  ASSERT_TRUE(counts.count(3));
  EXPECT_NEAR(counts.at(1) / static_cast<double>(draws), 0.5 / 0.8, 0.03);
}

TEST(Sampler, TopPAlwaysKeepsOneToken) {
  SamplingParams p = plain(1.0f, 3);
  p.top_p = 0.0f;
  Sampler sampler(p, 3);
  const auto counts = histogram(sampler, {1.0f, 1.2f, 1.1f}, 500);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_TRUE(counts.count(1));
}

TEST(Sampler, TopPAfterTopK) {
  // top_k 3 keeps 0.4, 0.3, 0.2 (renormalised 4/9, 3/9, 2/9); top_p 0.7 then keeps the first two.
  const std::vector<float> logits = logits_for({0.05, 0.2, 0.4, 0.05, 0.3});
  SamplingParams p = plain(1.0f, 23);
  p.top_k = 3;
  p.top_p = 0.7f;
  Sampler sampler(p, 5);
  const auto counts = histogram(sampler, logits, 5000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(2));
  EXPECT_TRUE(counts.count(4));
}

TEST(Sampler, TopPCutDeepInAFlatDistribution) {
  // 300 even ids at logit 1 hold e/(e+1) = 73% of the mass, 300 odd ids at logit 0 the rest.
  // top_p 0.7 keeps ~287 even ids (past the first sorted block of 256) and no odd one.
  std::vector<float> logits(600);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 2 == 0 ? 1.0f : 0.0f;
  SamplingParams p = plain(1.0f, 41);
  p.top_p = 0.7f;
  Sampler sampler(p, 600);
  const auto counts = histogram(sampler, logits, 1200);
  for (const auto& [token, count] : counts) EXPECT_EQ(token % 2, 0) << "odd id " << token;
  EXPECT_GT(counts.size(), 265u);  // ~282 distinct ids expected from 1200 draws
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // p_max 0.5, min_p 0.2: threshold 0.1 drops the 0.05 token but keeps the 0.15 one.
  const std::vector<float> logits = logits_for({0.05, 0.3, 0.15, 0.5});
  SamplingParams p = plain(1.0f, 31);
  p.min_p = 0.2f;
  Sampler sampler(p, 4);
  const auto counts = histogram(sampler, logits, 10000);
  EXPECT_FALSE(counts.count(0)) << "p=0.05 is under min_p * p_max";
  EXPECT_TRUE(counts.count(1));
  EXPECT_TRUE(counts.count(2));
  EXPECT_TRUE(counts.count(3));
}

TEST(Sampler, MinPWithTopK) {
  const std::vector<float> logits = logits_for({0.05, 0.3, 0.15, 0.5});
  SamplingParams p = plain(1.0f, 37);
  p.top_k = 3;     // keeps 0.5, 0.3, 0.15 → renormalised 0.526, 0.316, 0.158
  p.min_p = 0.4f;  // threshold 0.21 drops the 0.158 token
  Sampler sampler(p, 4);
  const auto counts = histogram(sampler, logits, 5000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(1));
  EXPECT_TRUE(counts.count(3));
}

TEST(Sampler, MaskedLogitsNeverSampled) {
  Sampler sampler(plain(1.0f, 8), 4);
  const auto counts = histogram(sampler, {-kInf, 0.0f, std::nanf(""), 0.0f}, 2000);
  EXPECT_FALSE(counts.count(0));
  EXPECT_FALSE(counts.count(2));
}

// Sampling among the tokens of a bitset draws what sampling with the others at -inf draws, and
// for top_k below the number of allowed tokens, what a sampler over those tokens alone draws.
TEST(Sampler, SamplingAmongAllowedTokensDrawsLikeTheOthersAtMinusInfinity) {
  const int n_vocab = 1000;
  const std::vector<float> raw = random_logits(n_vocab, 5);
  std::vector<uint64_t> allowed((n_vocab + 63) / 64, 0);
  std::vector<float> masked(n_vocab, -kInf), kept;
  std::vector<TokenId> kept_id;
  std::mt19937_64 rng(6);
  for (TokenId t = 0; t < n_vocab; ++t) {
    if (rng() % 10 != 0) continue;
    allowed[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
    masked[t] = raw[t];
    kept.push_back(raw[t]);
    kept_id.push_back(t);
  }
  ASSERT_GT(kept.size(), 40u);
  struct Filters {
    float temperature;
    int top_k;
    float top_p, min_p;
  };
  for (const Filters f :
       {Filters{0.8f, 0, 1.0f, 0.0f}, Filters{0.8f, 0, 0.9f, 0.0f}, Filters{0.8f, 0, 1.0f, 0.1f},
        Filters{0.8f, 5, 1.0f, 0.0f}, Filters{1.0f, 20, 0.95f, 0.05f},
        Filters{1.0f, 500, 0.95f, 0.05f}, Filters{0.0f, 40, 0.95f, 0.05f}}) {
    SamplingParams p = plain(f.temperature, 99);
    p.top_k = f.top_k, p.top_p = f.top_p, p.min_p = f.min_p;
    Sampler among(p, n_vocab), at_minus_inf(p, n_vocab), alone(p, static_cast<int>(kept.size()));
    for (int i = 0; i < 200; ++i) {
      std::vector<float> a = raw, b = masked, c = kept;
      const TokenId token = among.sample(a.data(), {}, allowed);
      ASSERT_EQ(token, at_minus_inf.sample(b.data(), {}))
          << "top_k " << f.top_k << " top_p " << f.top_p << " min_p " << f.min_p << " draw " << i;
      // At or above the number of allowed tokens, top_k sorts the masked vocabulary and not the
      // allowed tokens alone: the same distribution, drawn in another order.
      if (f.top_k < static_cast<int>(kept.size())) {
        ASSERT_EQ(token, kept_id[alone.sample(c.data(), {})]) << "top_k " << f.top_k;
      }
    }
  }
}

TEST(Sampler, LargeVocabTopPWithoutTopK) {
  // A Qwen-sized vocabulary where three tokens hold almost all the mass.
  const int n_vocab = 152064;
  std::vector<float> base = random_logits(n_vocab, 3);
  for (float& l : base) l *= 0.1f;
  base[100] = 30.0f;
  base[70000] = 29.5f;
  base[152000] = 29.0f;
  SamplingParams p = plain(1.0f, 77);
  p.top_p = 0.95f;
  p.min_p = 0.0f;
  Sampler sampler(p, n_vocab);
  for (int i = 0; i < 10; ++i) {
    std::vector<float> copy = base;
    const TokenId t = sampler.sample(copy.data(), {});
    EXPECT_TRUE(t == 100 || t == 70000 || t == 152000) << t;
  }
}

TEST(Sampler, RepetitionPenaltyChangesArgmax) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler sampler(p, 3);
  std::vector<float> logits = {2.0f, 1.8f, -1.0f};  // 2.0 / 1.5 = 1.33 < 1.8
  EXPECT_EQ(sampler.sample(logits.data(), {0}), 1);
}

TEST(Sampler, RepetitionPenaltyMultipliesNegativeLogits) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler sampler(p, 2);
  std::vector<float> logits = {-1.0f, -1.2f};  // -1.0 * 1.5 = -1.5 < -1.2
  EXPECT_EQ(sampler.sample(logits.data(), {0}), 1);
}

TEST(Sampler, RepetitionPenaltyCountsEachTokenOnce) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler sampler(p, 2);
  // Once: 2.0 / 1.5 = 1.33 > 1.2 keeps token 0; twice would give 0.89 and flip to token 1.
  std::vector<float> logits = {2.0f, 1.2f};
  EXPECT_EQ(sampler.sample(logits.data(), {0, 0, 0}), 0);
}

TEST(Sampler, RepetitionPenaltyOnlyLooksAtLastN) {
  SamplingParams p = plain(0.0f);
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 2;
  Sampler sampler(p, 3);
  std::vector<float> logits = {2.0f, 1.8f, 0.0f};
  // Token 0 is outside the last two tokens, so it is not penalised.
  EXPECT_EQ(sampler.sample(logits.data(), {0, 2, 2}), 0);
  std::vector<float> again = {2.0f, 1.8f, 0.0f};
  EXPECT_EQ(sampler.sample(again.data(), {2, 0, 2}), 1);
}

TEST(Sampler, RejectsBadInput) {
  EXPECT_THROW(Sampler(plain(1.0f), 0), Error);
  SamplingParams nan_temperature = plain(std::nanf(""));
  EXPECT_THROW(Sampler(nan_temperature, 4), Error);
  SamplingParams zero_penalty = plain(1.0f);
  zero_penalty.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler(zero_penalty, 4), Error);

  SamplingParams p = plain(1.0f);
  p.repeat_penalty = 1.1f;
  Sampler sampler(p, 4);
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  EXPECT_THROW(sampler.sample(logits.data(), {1, 4}), Error);
  EXPECT_THROW(sampler.sample(logits.data(), {-1}), Error);
  std::vector<float> masked = {-kInf, -kInf, std::nanf(""), -kInf};
  EXPECT_THROW(sampler.sample(masked.data(), {}), Error);
}

TEST(Logprobs, MatchesDirectLogSoftmax) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f};
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  const TokenLogprobs lp = compute_logprobs(logits.data(), 4, 1, 0);
  EXPECT_NEAR(lp.logprob, -1.0 - std::log(z), 1e-6);
  EXPECT_TRUE(lp.top.empty());
}

TEST(Logprobs, StableForHugeLogits) {
  // exp(1e4) overflows; a max-subtracted log-softmax does not.
  const std::vector<float> logits = {10000.0f, 9999.0f, -10000.0f};
  const TokenLogprobs lp = compute_logprobs(logits.data(), 3, 0, 3);
  const double expected = -std::log1p(std::exp(-1.0));
  EXPECT_NEAR(lp.logprob, expected, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_NEAR(lp.top[1].second, expected - 1.0, 1e-6);
  EXPECT_TRUE(std::isfinite(lp.top[2].second));
}

TEST(Logprobs, TopNDescendingWithLowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 2.5f};
  const TokenLogprobs lp = compute_logprobs(logits.data(), 6, 4, 4);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 5);
  EXPECT_EQ(lp.top[3].first, 2);
  for (size_t i = 1; i < lp.top.size(); ++i) EXPECT_GE(lp.top[i - 1].second, lp.top[i].second);
  EXPECT_FLOAT_EQ(lp.top[0].second, lp.top[1].second);
  EXPECT_LT(lp.logprob, lp.top[3].second);  // token 4 is the least likely
}

TEST(Logprobs, TopNLargerThanVocabIsClamped) {
  const std::vector<float> logits = {0.0f, 1.0f};
  const TokenLogprobs lp = compute_logprobs(logits.data(), 2, 0, 10);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_NEAR(std::exp(lp.top[0].second) + std::exp(lp.top[1].second), 1.0, 1e-6);
}

TEST(Logprobs, RejectsBadInput) {
  const std::vector<float> logits = {0.0f, 1.0f};
  EXPECT_THROW(compute_logprobs(logits.data(), 2, 2, 1), Error);
  EXPECT_THROW(compute_logprobs(logits.data(), 2, -1, 1), Error);
  EXPECT_THROW(compute_logprobs(logits.data(), 2, 0, -1), Error);
  EXPECT_THROW(compute_logprobs(logits.data(), 0, 0, 1), Error);
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  const auto r = m.push("hello");
  EXPECT_EQ(r.emit, "hello");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopAcrossChunkBoundary) {
  StopMatcher m({"lo S"});
  const auto first = m.push("Hel");
  EXPECT_EQ(first.emit, "He");  // "l" could start "lo S"
  EXPECT_FALSE(first.stopped);
  const auto second = m.push("lo STOP");
  EXPECT_EQ(second.emit, "l");
  EXPECT_TRUE(second.stopped);
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"END", "##", "x"});
  const auto r = m.push("abc ## def END");
  EXPECT_EQ(r.emit, "abc ");
  EXPECT_TRUE(r.stopped);
}

TEST(StopMatcher, HoldsLongestPrefixAcrossStops) {
  StopMatcher m({"cx", "abcd"});
  const auto r = m.push("zzabc");
  EXPECT_EQ(r.emit, "zz");  // the longest held prefix wins: "abc" of "abcd", not "c" of "cx"
  const auto r2 = m.push("e");
  EXPECT_EQ(r2.emit, "abce");
  EXPECT_FALSE(r2.stopped);
}

TEST(StopMatcher, HeldPrefixReleasedByFlush) {
  StopMatcher m({"<|end|>"});
  const auto r = m.push("answer <|en");
  EXPECT_EQ(r.emit, "answer ");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.flush(), "<|en");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("ST").emit, "");
  const auto r = m.push("ART");
  EXPECT_EQ(r.emit, "START");
  EXPECT_FALSE(r.stopped);
}

TEST(StopMatcher, StopSpanningManySmallChunks) {
  StopMatcher m({"</s>"});
  std::string out;
  bool stopped = false;
  for (const char* piece : {"ok", "<", "/", "s", ">", "tail"}) {
    const auto r = m.push(piece);
    out += r.emit;
    if (r.stopped) {
      stopped = true;
      break;
    }
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "ok");
}

TEST(StopMatcher, EmptyStopStringsIgnored) {
  StopMatcher m({"", "Z"});
  const auto r = m.push("abc");
  EXPECT_EQ(r.emit, "abc");
  EXPECT_FALSE(r.stopped);
}

TEST(StopMatcher, IncompleteUtf8CharacterHeldBack) {
  StopMatcher m({});
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, three bytes
  const auto r = m.push("a" + euro.substr(0, 2));
  EXPECT_EQ(r.emit, "a");
  const auto r2 = m.push(euro.substr(2) + "b");
  EXPECT_EQ(r2.emit, euro + "b");
}

TEST(StopMatcher, Utf8CharacterNotSplitByHeldPrefix) {
  // The stop string starts with the last byte of "é" (0xC3 0xA9): holding only that byte would
  // split the character, so the whole character is held.
  StopMatcher m({"\xA9X"});
  const auto r = m.push("caf\xC3\xA9");
  EXPECT_EQ(r.emit, "caf");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.flush(), "\xC3\xA9");
}

TEST(StopMatcher, FourByteCharacterAcrossThreePushes) {
  StopMatcher m({"!"});
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600
  std::string out;
  out += m.push(emoji.substr(0, 1)).emit;
  EXPECT_EQ(out, "");
  out += m.push(emoji.substr(1, 2)).emit;
  EXPECT_EQ(out, "");
  const auto r = m.push(emoji.substr(3) + "hi!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(out + r.emit, emoji + "hi");
}

TEST(StopMatcher, MalformedBytesAreNotHeldForever) {
  StopMatcher m({});
  EXPECT_EQ(m.push("\x80\x80\x80\x80\x80").emit, "\x80\x80\x80\x80\x80");
  EXPECT_EQ(m.push("\xFF").emit, "\xFF");
}

}  // namespace
}  // namespace k25
