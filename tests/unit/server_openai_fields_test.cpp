// OpenAI request fields beyond the basics: logit_bias, presence/frequency penalties, n, the
// max_tokens default and bound; and responses with n choices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_parsing.h"
#include "server/response_format.h"

namespace k25 {
namespace {

using nlohmann::json;

RequestDefaults defaults() {
  RequestDefaults d;
  d.context_size = 512;
  d.n_vocab = 100;
  return d;
}

ParsedRequest completions(const json& body) {
  return parse_request_body(ApiFlavor::Completions, body.dump(), defaults());
}

ApiError error_of(ApiFlavor flavor, const json& body) {
  try {
    parse_request_body(flavor, body.dump(), defaults());
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException for " << body.dump();
  return {};
}

TEST(OpenAiFields, LogitBiasAndPenalties) {
  for (ApiFlavor flavor : {ApiFlavor::Generate, ApiFlavor::Completions}) {
    ParsedRequest r =
        parse_request_body(flavor,
                           R"({"prompt": "x", "logit_bias": {"5": 100, "0": -100, "99": 0.5},
            "presence_penalty": -2, "frequency_penalty": 1.5})",
                           defaults());
    std::vector<std::pair<TokenId, float>> expected = {{0, -100.0f}, {5, 100.0f}, {99, 0.5f}};
    auto got = r.sampling.logit_bias;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected);
    EXPECT_FLOAT_EQ(r.sampling.presence_penalty, -2.0f);
    EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 1.5f);
  }
  ParsedRequest none = completions({{"prompt", "x"}});
  EXPECT_TRUE(none.sampling.logit_bias.empty());
  EXPECT_EQ(none.sampling.presence_penalty, 0.0f);
  EXPECT_EQ(none.sampling.frequency_penalty, 0.0f);
}

TEST(OpenAiFields, BadLogitBiasAndPenaltiesAre400) {
  const json cases[] = {
      {{"logit_bias", {{"abc", 1}}}},
      {{"logit_bias", {{"-1", 1}}}},
      {{"logit_bias", {{"100", 1}}}},
      {{"logit_bias", {{"007", 1}}}},
      {{"logit_bias", {{"", 1}}}},
      {{"logit_bias", {{"1e3", 1}}}},
      {{"logit_bias", {{"5", 100.5}}}},
      {{"logit_bias", {{"5", -101}}}},
      {{"logit_bias", {{"5", "1"}}}},
      {{"logit_bias", {{"5", true}}}},
      {{"logit_bias", json::array()}},
      {{"logit_bias", "5:1"}},
      {{"logit_bias", {{"99999999999999999999", 1}}}},
  };
  for (const json& extra : cases) {
    json body = {{"prompt", "x"}};
    body.update(extra);
    ApiError e = error_of(ApiFlavor::Completions, body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, "logit_bias") << body.dump() << " -> " << e.message;
  }
  json everything = json::object();
  for (int i = 0; i < 100; ++i) everything[std::to_string(i)] = -100;
  ApiError all = error_of(ApiFlavor::Generate, {{"prompt", "x"}, {"logit_bias", everything}});
  EXPECT_NE(all.message.find("every token"), std::string::npos) << all.message;
  EXPECT_EQ(error_of(ApiFlavor::Generate, {{"prompt", "x"}, {"presence_penalty", 2.01}}).param,
            "presence_penalty");
  EXPECT_EQ(error_of(ApiFlavor::Generate, {{"prompt", "x"}, {"frequency_penalty", "1"}}).param,
            "frequency_penalty");
}

TEST(OpenAiFields, NChoices) {
  EXPECT_EQ(completions({{"prompt", "x"}}).n, 1);
  EXPECT_EQ(completions({{"prompt", "x"}, {"n", 16}}).n, 16);
  EXPECT_EQ(completions({{"prompt", "x"}, {"n", 3}, {"best_of", 3}}).n, 3);
  ParsedRequest chat = parse_request_body(
      ApiFlavor::Chat, R"({"messages": [{"role": "user", "content": "x"}], "n": 4})", defaults());
  EXPECT_EQ(chat.n, 4);
  ApiError too_many = error_of(ApiFlavor::Completions, {{"prompt", "x"}, {"n", 17}});
  EXPECT_EQ(too_many.param, "n");
  EXPECT_NE(too_many.message.find("16"), std::string::npos) << too_many.message;
}

TEST(OpenAiFields, MaxTokensDefaultsToTheRestOfTheContext) {
  RequestDefaults d = defaults();
  ParsedRequest omitted = completions({{"prompt", "x"}});
  EXPECT_EQ(omitted.max_tokens, 0);
  EXPECT_EQ(resolve_max_tokens(omitted, d, 12), 500);
  d.max_tokens = 128;  // a configured default applies, cut to what fits
  EXPECT_EQ(resolve_max_tokens(omitted, d, 12), 128);
  EXPECT_EQ(resolve_max_tokens(omitted, d, 500), 12);

  ParsedRequest given = completions({{"prompt", "x"}, {"max_tokens", 500}});
  EXPECT_EQ(resolve_max_tokens(given, d, 12), 500);
  try {
    resolve_max_tokens(given, d, 13);
    ADD_FAILURE() << "no ApiException";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    EXPECT_EQ(e.error().param, "max_tokens");
    EXPECT_EQ(e.error().code, "context_length_exceeded");
    EXPECT_NE(e.error().message.find("at most 499"), std::string::npos) << e.error().message;
  }
  // Chat: max_completion_tokens wins over max_tokens, and errors name it.
  ParsedRequest chat =
      parse_request_body(ApiFlavor::Chat,
                         R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
          "max_completion_tokens": 400})",
                         defaults());
  EXPECT_EQ(chat.max_tokens, 400);
  EXPECT_EQ(chat.max_tokens_field, "max_completion_tokens");
  try {
    resolve_max_tokens(chat, d, 200);
    ADD_FAILURE() << "no ApiException";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().param, "max_completion_tokens");
  }
}

GenerationOutcome choice(std::string text, FinishReason reason, int completion_tokens) {
  GenerationOutcome o;
  o.text = std::move(text);
  o.finish_reason = reason;
  o.prompt_tokens = 7;
  o.cached_tokens = 2;
  o.completion_tokens = completion_tokens;
  return o;
}

TEST(OpenAiResponses, NChoicesWithIndicesAndSummedUsage) {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Chat;
  ctx.id = "chatcmpl-1";
  const std::vector<GenerationOutcome> choices = {choice("a", FinishReason::Length, 4),
                                                  choice("b", FinishReason::Stop, 2)};
  json j = full_response(ctx, choices);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][1]["message"]["content"], "b");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(stream_text_chunk(ctx, 1, "x", nullptr)["choices"][0]["index"], 1);
  EXPECT_EQ(stream_finish_chunk(ctx, 1, choices[1])["choices"][0]["index"], 1);
  EXPECT_TRUE(stream_usage_chunk(ctx, choices).is_null());  // not asked for
  ctx.include_usage = true;
  EXPECT_EQ(stream_usage_chunk(ctx, choices)["usage"]["completion_tokens"], 6);
}

TEST(OpenAiResponses, FinishReasonsAreOpenAis) {
  EXPECT_STREQ(openai_finish_reason(FinishReason::Stop), "stop");
  EXPECT_STREQ(openai_finish_reason(FinishReason::Length), "length");
  // /generate keeps k25's own names.
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Generate;
  EXPECT_EQ(full_response(ctx, {choice("a", FinishReason::Cancelled, 1)})["finish_reason"],
            "cancelled");
}

}  // namespace
}  // namespace k25
