// k25-verify's comparison (R-OPS1): parsing both logprob shapes, the top-N KL divergence and the
// per-request verdict.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "verify/compare.h"

namespace k25::verify {
namespace {

using nlohmann::json;

TokenLogprobs tok(std::string token, std::map<std::string, double> top) {
  TokenLogprobs t;
  t.token = std::move(token);
  t.logprob = top.count(t.token) ? top[t.token] : -1;
  t.top = std::move(top);
  return t;
}

Completion completion(std::vector<TokenLogprobs> tokens, std::string finish = "length") {
  Completion c;
  c.tokens = std::move(tokens);
  c.finish_reason = std::move(finish);
  return c;
}

TEST(VerifyCompare, KlOfIdenticalSetsIsZero) {
  std::map<std::string, double> p = {{"a", std::log(0.6)}, {"b", std::log(0.3)}};
  EXPECT_NEAR(top_logprob_kl(p, p), 0.0, 1e-12);
}

TEST(VerifyCompare, KlMatchesTheClosedFormOnAFullDistribution) {
  // Both sets cover all the mass: KL is the textbook sum.
  std::map<std::string, double> p = {{"a", std::log(0.5)}, {"b", std::log(0.5)}};
  std::map<std::string, double> q = {{"a", std::log(0.9)}, {"b", std::log(0.1)}};
  const double expected = 0.5 * std::log(0.5 / 0.9) + 0.5 * std::log(0.5 / 0.1);
  EXPECT_NEAR(top_logprob_kl(p, q), expected, 1e-6);
}

TEST(VerifyCompare, KlSpreadsLeftoverMassOverMissingTokens) {
  // q lacks "b": it gets q's leftover (0.2) shared with the rest bucket → 0.1.
  std::map<std::string, double> p = {{"a", std::log(0.8)}, {"b", std::log(0.2)}};
  std::map<std::string, double> q = {{"a", std::log(0.8)}};
  const double expected =
      0.8 * std::log(0.8 / 0.8) + 0.2 * std::log(0.2 / 0.1) + 1e-10 * std::log(1e-10 / 0.1);
  EXPECT_NEAR(top_logprob_kl(p, q), expected, 1e-6);
  EXPECT_GT(top_logprob_kl(p, q), 0.1);
}

TEST(VerifyCompare, SameTokensAndCloseLogprobsMatch) {
  Completion a = completion({tok("x", {{"x", -0.1}, {"y", -2.4}}), tok("z", {{"z", -0.5}})});
  Completion b = completion({tok("x", {{"x", -0.1001}, {"y", -2.4}}), tok("z", {{"z", -0.5}})});
  Comparison c = compare_completions(a, b, 0.05);
  EXPECT_TRUE(c.match);
  EXPECT_EQ(c.n_compared, 2);
  EXPECT_EQ(c.first_token_mismatch, -1);
}

TEST(VerifyCompare, DifferentTokenStopsTheComparison) {
  Completion a = completion({tok("x", {{"x", -0.1}}), tok("y", {{"y", -0.1}}), tok("q", {})});
  Completion b = completion({tok("x", {{"x", -0.1}}), tok("w", {{"w", -0.1}}), tok("r", {})});
  Comparison c = compare_completions(a, b, 100.0);
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.first_token_mismatch, 1);
  EXPECT_EQ(c.n_compared, 2);
  EXPECT_EQ(c.reasons, std::vector<std::string>{"token"});
}

TEST(VerifyCompare, KlAboveThresholdDiffersEvenWithSameTokens) {
  Completion a = completion({tok("x", {{"x", std::log(0.5)}, {"y", std::log(0.5)}})});
  Completion b = completion({tok("x", {{"x", std::log(0.9)}, {"y", std::log(0.1)}})});
  Comparison c = compare_completions(a, b, 0.05);
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.reasons, std::vector<std::string>{"kl"});
  EXPECT_EQ(c.max_kl_position, 0);
  EXPECT_TRUE(compare_completions(a, b, 1.0).match);
}

TEST(VerifyCompare, FinishReasonAndLengthCount) {
  Completion a = completion({tok("x", {})}, "stop");
  Completion b = completion({tok("x", {}), tok("y", {})}, "length");
  Comparison c = compare_completions(a, b, 0.05);
  EXPECT_FALSE(c.match);
  EXPECT_TRUE(c.finish_reason_differs);
  EXPECT_EQ(c.reasons, (std::vector<std::string>{"length", "finish_reason"}));
}

TEST(VerifyCompare, ParsesOpenAiLegacyCompletionLogprobs) {
  json r = json::parse(R"({"choices":[{"text":"ab","finish_reason":"length","logprobs":{
      "tokens":["a","b"],"token_logprobs":[-0.5,-1.0],
      "top_logprobs":[{"a":-0.5,"c":-1.5},{"b":-1.0}],"text_offset":[0,1]}}]})");
  Completion c = parse_completion(r);
  EXPECT_EQ(c.text, "ab");
  EXPECT_EQ(c.finish_reason, "length");
  ASSERT_EQ(c.tokens.size(), 2u);
  EXPECT_EQ(c.tokens[0].token, "a");
  EXPECT_DOUBLE_EQ(c.tokens[0].logprob, -0.5);
  EXPECT_DOUBLE_EQ(c.tokens[0].top.at("c"), -1.5);
}

TEST(VerifyCompare, ParsesChatShapedLogprobs) {
  json r = json::parse(R"({"choices":[{"text":"a","finish_reason":"stop","logprobs":{
      "content":[{"id":5,"token":"a","logprob":-0.25,"bytes":[97],
                  "top_logprobs":[{"id":5,"token":"a","logprob":-0.25},
                                  {"id":6,"token":"b","logprob":-2.0}]}]}}]})");
  Completion c = parse_completion(r);
  ASSERT_EQ(c.tokens.size(), 1u);
  EXPECT_EQ(c.tokens[0].token, "a");
  EXPECT_DOUBLE_EQ(c.tokens[0].top.at("b"), -2.0);
}

TEST(VerifyCompare, RejectsAnswersWithoutLogprobs) {
  EXPECT_THROW(parse_completion(json::parse(R"({"choices":[{"text":"a","logprobs":null}]})")),
               Error);
  EXPECT_THROW(parse_completion(json::parse(R"({"error":{"message":"x"}})")), Error);
  EXPECT_THROW(parse_completion(json::parse(
                   R"({"choices":[{"logprobs":{"tokens":["a"],"token_logprobs":[]}}]})")),
               Error);
}

}  // namespace
}  // namespace k25::verify
