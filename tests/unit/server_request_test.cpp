// Request parsing and validation of the HTTP API: bodies, x-* headers, chat templates, auth.
#include <gtest/gtest.h>

#include <map>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/chat_template.h"
#include "server/flash_headers.h"
#include "server/request_parsing.h"
#include "server/response_format.h"

namespace k25 {
namespace {

// Runs f, expects an ApiException, returns it.
template <class F>
ApiError api_error_of(F f) {
  try {
    f();
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException";
  return {};
}

RequestDefaults defaults() {
  RequestDefaults d;
  d.context_size = 512;
  d.max_tokens = 64;
  return d;
}

FlashHints hints_from(const std::map<std::string, std::string>& headers) {
  return parse_flash_headers([&](std::string_view name) -> std::optional<std::string_view> {
    auto it = headers.find(std::string(name));
    if (it == headers.end()) return std::nullopt;
    return std::string_view(it->second);
  });
}

TEST(FlashHeaders, DefaultsWhenAbsent) {
  FlashHints h = hints_from({});
  EXPECT_FALSE(h.prompt_length);
  EXPECT_FALSE(h.response_length);
  EXPECT_EQ(h.sla, LatencySla::Silver);
  EXPECT_EQ(sla_priority(h.sla), 50);
  EXPECT_EQ(h.domain, "default");
}

TEST(FlashHeaders, ParsesTheNoteExample) {
  FlashHints h = hints_from({{"x-prompt-length", "2456"},
                             {"x-response-length", "512"},
                             {"x-latency-sla", "gold"},
                             {"x-domain-hint", "legal"}});
  EXPECT_EQ(*h.prompt_length, 2456);
  EXPECT_EQ(*h.response_length, 512);
  EXPECT_EQ(sla_priority(h.sla), 100);
  EXPECT_EQ(h.domain, "legal");
  EXPECT_EQ(sla_priority(hints_from({{"x-latency-sla", "bronze"}}).sla), 10);
}

TEST(FlashHeaders, MalformedValuesAre400NamingTheHeader) {
  static const std::string too_long(65, 'a');
  const std::pair<const char*, const char*> cases[] = {
      {"x-prompt-length", "-5"},
      {"x-prompt-length", "12abc"},
      {"x-prompt-length", ""},
      {"x-prompt-length", "99999999999999999999"},
      {"x-response-length", "1e3"},
      {"x-response-length", "+7"},
      {"x-latency-sla", "platinum"},
      {"x-latency-sla", "Gold "},
      {"x-domain-hint", "le gal"},
      {"x-domain-hint", ""},
      {"x-domain-hint", too_long.c_str()},
  };
  for (const auto& [name, value] : cases) {
    // Explicit captures: clang before 16 cannot capture structured bindings implicitly.
    ApiError e = api_error_of([&name = name, &value = value] { hints_from({{name, value}}); });
    EXPECT_EQ(e.status, 400) << name << ": " << value;
    EXPECT_EQ(e.param, name);
    EXPECT_NE(e.message.find(name), std::string::npos) << e.message;
  }
}

TEST(RequestBody, GenerateFields) {
  ParsedRequest r = parse_request_body(
      ApiFlavor::Generate,
      R"({"prompt":"hi","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,"stop":["x","y"],
          "seed":42,"stream":true,"session_id":"s1"})",
      defaults());
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*r.sampling.seed, 42u);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.session_id, "s1");
  EXPECT_EQ(r.top_logprobs, -1);
}

TEST(RequestBody, DefaultsAndNullsTakeConfiguredValues) {
  ParsedRequest r = parse_request_body(
      ApiFlavor::Completions, R"({"prompt":"hi","max_tokens":null,"stop":"."})", defaults());
  EXPECT_EQ(r.max_tokens, 0);  // not given: resolve_max_tokens applies the default
  EXPECT_EQ(resolve_max_tokens(r, defaults(), 10), 64);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"."}));
  EXPECT_FALSE(r.sampling.seed);
}

TEST(RequestBody, CompletionsPromptForms) {
  EXPECT_EQ(parse_request_body(ApiFlavor::Completions, R"({"prompt":["one"]})", defaults()).prompt,
            "one");
  ParsedRequest ids =
      parse_request_body(ApiFlavor::Completions, R"({"prompt":[1,2,3],"logprobs":2})", defaults());
  ASSERT_TRUE(ids.prompt_ids);
  EXPECT_EQ(ids.prompt_ids->size(), 3u);
  EXPECT_EQ(ids.top_logprobs, 2);
}

TEST(RequestBody, ChatMessagesLogprobsAndUsage) {
  ParsedRequest r = parse_request_body(ApiFlavor::Chat,
                                       R"({"messages":[{"role":"system","content":"Be brief."},
                      {"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"!"}]}],
          "max_completion_tokens":5,"logprobs":true,"top_logprobs":3,
          "stream":true,"stream_options":{"include_usage":true}})",
                                       defaults());
  // Messages pass through as sent (content parts included) for the template to format.
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1]["content"][1]["text"], "!");
  EXPECT_TRUE(r.tool_specs.is_null());
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.include_usage);
}

TEST(RequestBody, BadInputTable) {
  struct Case {
    ApiFlavor flavor;
    const char* body;
    const char* param;  // expected param ("" = none)
  };
  const Case cases[] = {
      {ApiFlavor::Generate, R"({"prompt": "x",)", ""},          // malformed JSON
      {ApiFlavor::Generate, "", ""},                            // empty body
      {ApiFlavor::Generate, "[1,2]", ""},                       // not an object
      {ApiFlavor::Generate, R"({"max_tokens": 5})", "prompt"},  // missing prompt
      {ApiFlavor::Generate, R"({"prompt": 5})", "prompt"},      // wrong type
      {ApiFlavor::Generate, R"({"prompt": ""})", "prompt"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": -1})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": 100000000})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": 18446744073709551615})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": "5"})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "max_tokens": 5.5})", "max_tokens"},
      {ApiFlavor::Generate, R"({"prompt": "x", "temperature": -0.1})", "temperature"},
      {ApiFlavor::Generate, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {ApiFlavor::Generate, R"({"prompt": "x", "top_p": 2})", "top_p"},
      {ApiFlavor::Generate, R"({"prompt": "x", "stop": 3})", "stop"},
      {ApiFlavor::Generate, R"({"prompt": "x", "stop": [""]})", "stop"},
      {ApiFlavor::Generate, R"({"prompt": "x", "seed": "a"})", "seed"},
      {ApiFlavor::Generate, R"({"prompt": "x", "stream": "yes"})", "stream"},
      {ApiFlavor::Completions, R"({"prompt": "x", "n": 17})", "n"},
      {ApiFlavor::Completions, R"({"prompt": "x", "n": 0})", "n"},
      {ApiFlavor::Completions, R"({"prompt": "x", "best_of": 3})", "best_of"},
      {ApiFlavor::Completions, R"({"prompt": "x", "n": 2, "best_of": 3})", "best_of"},
      {ApiFlavor::Completions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {ApiFlavor::Completions, R"({"prompt": [1, "a"]})", "prompt"},
      {ApiFlavor::Completions, R"({"prompt": "x", "stream_options": 1})", "stream_options"},
      {ApiFlavor::Chat, R"({"prompt": "x"})", "messages"},
      {ApiFlavor::Chat, R"({"messages": []})", "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"content": "hi"}]})", "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "user", "content": 5}]})", "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "assistant", "tool_calls": {}}]})", "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "tool", "tool_call_id": 7}]})", "messages"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})",
       "tools"},
      {ApiFlavor::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [1]})",
       "tools"},
      {ApiFlavor::Chat,
       R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1})",
       "chat_template_kwargs"},
      {ApiFlavor::Chat, R"({"messages": [{"role":"user","content":"x"}], "n": 100})", "n"},
      {ApiFlavor::Chat, R"({"messages": [{"role":"user","content":"x"}], "top_logprobs": 2})",
       "top_logprobs"},
  };
  for (const Case& c : cases) {
    ApiError e = api_error_of([&] { parse_request_body(c.flavor, c.body, defaults()); });
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(RequestBody, InvalidUtf8AndDeepNestingAreMalformedJson) {
  ApiError utf8 = api_error_of(
      [] { parse_request_body(ApiFlavor::Generate, "{\"prompt\":\"\xff\xfe\"}", defaults()); });
  EXPECT_EQ(utf8.code, "invalid_json");
  std::string deep = "{\"prompt\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ApiError nested =
      api_error_of([&] { parse_request_body(ApiFlavor::Generate, deep, defaults()); });
  EXPECT_EQ(nested.code, "invalid_json");
  EXPECT_NE(nested.message.find("nested"), std::string::npos);
}

TEST(RequestBody, TokenizeAndDetokenize) {
  TokenizeRequest t = parse_tokenize_body(R"({"content":"abc","add_special":true})");
  EXPECT_EQ(t.content, "abc");
  EXPECT_TRUE(t.add_special);
  EXPECT_FALSE(parse_tokenize_body(R"({"content":"abc"})").add_special);
  EXPECT_EQ(parse_detokenize_body(R"({"tokens":[1,2]})", 10), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(api_error_of([] { parse_detokenize_body(R"({"tokens":[10]})", 10); }).param, "tokens");
  EXPECT_EQ(api_error_of([] { parse_detokenize_body(R"({"tokens":[-1]})", 10); }).param, "tokens");
  EXPECT_EQ(api_error_of([] { parse_tokenize_body(R"({"content":1})"); }).param, "content");
}

TEST(ApiErrorShape, IsOpenAiShaped) {
  ApiError e;
  e.status = 400;
  e.message = "bad";
  e.param = "prompt";
  nlohmann::json body = error_body(e);
  EXPECT_EQ(body["error"]["message"], "bad");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "prompt");
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(Auth, BearerComparison) {
  EXPECT_TRUE(bearer_matches("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(bearer_matches("bearer sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-12", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-1234", "sk-123"));
  EXPECT_FALSE(bearer_matches("Bearer sk-124", "sk-123"));
  EXPECT_FALSE(bearer_matches("sk-123", "sk-123"));
  EXPECT_FALSE(bearer_matches("", "sk-123"));
}

TEST(ResponseFormat, GenerateResponseHasTheR_API1Fields) {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Generate;
  ctx.hints.sla = LatencySla::Gold;
  GenerationOutcome o;
  o.text = "hello";
  o.finish_reason = FinishReason::Length;
  o.prompt_tokens = 3;
  o.completion_tokens = 2;
  o.ttft_ms = 1.5;
  o.total_ms = 4;
  nlohmann::json j = full_response(ctx, {o});
  EXPECT_EQ(j["text"], "hello");
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
  EXPECT_EQ(j["timings"]["ttft_ms"], 1.5);
  EXPECT_EQ(j["timings"]["total_ms"], 4);
  EXPECT_EQ(j["flash"]["domain"], "default");
  EXPECT_EQ(j["flash"]["level"], 0);
  EXPECT_TRUE(j["flash"]["skipped_blocks"].is_array());
  EXPECT_TRUE(j["flash"]["skipped_heads"].is_array());
  EXPECT_EQ(j["flash"]["priority"], 100);
}

TEST(ResponseFormat, ChatStreamEndsWithUsageChunkWhenAsked) {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Chat;
  ctx.id = "chatcmpl-1";
  ctx.include_usage = true;
  GenerationOutcome o;
  o.prompt_tokens = 4;
  o.completion_tokens = 2;
  EXPECT_EQ(stream_start_chunk(ctx, 0)["choices"][0]["delta"]["role"], "assistant");
  nlohmann::json finish = stream_finish_chunk(ctx, 0, o);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  nlohmann::json usage = stream_usage_chunk(ctx, {o});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
  EXPECT_EQ(sse_event({{"a", 1}}), "data: {\"a\":1}\n\n");
}

// The chat page shows each answer's plan and timings: k25 adds them to OpenAI's shapes, on the
// whole response and on the chunk with the finish reason (not on the usage chunk).
TEST(ResponseFormat, ChatResponsesCarryTimingsAndFlash) {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Chat;
  ctx.include_usage = true;
  ctx.flash_level = 1;
  GenerationOutcome o;
  o.ttft_ms = 2.5;
  o.total_ms = 9;
  nlohmann::json whole = full_response(ctx, {o});
  EXPECT_EQ(whole["timings"]["ttft_ms"], 2.5);
  EXPECT_EQ(whole["timings"]["total_ms"], 9);
  EXPECT_EQ(whole["flash"]["plan"], "full");
  EXPECT_EQ(whole["flash"]["level"], 1);
  nlohmann::json finish = stream_finish_chunk(ctx, 0, o);
  EXPECT_EQ(finish["timings"]["ttft_ms"], 2.5);
  EXPECT_EQ(finish["flash"]["plan"], "full");
  EXPECT_FALSE(stream_usage_chunk(ctx, {o}).contains("flash"));
  EXPECT_FALSE(stream_text_chunk(ctx, 0, "x", nullptr).contains("timings"));
  ctx.flavor = ApiFlavor::Completions;
  EXPECT_EQ(full_response(ctx, {o})["timings"]["total_ms"], 9);
}

}  // namespace
}  // namespace k25
