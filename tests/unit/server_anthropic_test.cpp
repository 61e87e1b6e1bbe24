// Anthropic Messages parsing and response shapes, without a server.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/response_stream.h"

namespace k25 {
namespace {

using nlohmann::json;

RequestDefaults defaults() {
  RequestDefaults d;
  d.context_size = 512;
  return d;
}

ApiError error_of(const std::string& body) {
  try {
    parse_messages_body(body, defaults());
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no ApiException for " << body;
  return {};
}

TEST(AnthropicRequest, SystemBlocksMessagesAndFields) {
  ParsedRequest r = parse_messages_body(R"({
      "model": "claude-x", "max_tokens": 20, "temperature": 0.5, "top_p": 0.9, "top_k": 7,
      "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
      "messages": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
                   {"role": "user", "content": [{"type": "text", "text": "a"},
                                                {"type": "text", "text": "b"}]}],
      "stop_sequences": ["\n\n", "END"], "metadata": {"user_id": "u-1"}, "stream": true})",
                                        defaults());
  EXPECT_EQ(r.flavor, ApiFlavor::Messages);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "Be brief.");
  EXPECT_EQ(r.messages[2]["role"], "assistant");
  EXPECT_EQ(r.messages[3]["content"], "ab");
  EXPECT_TRUE(r.assistant_prefill.empty());
  EXPECT_EQ(r.model, "claude-x");
  EXPECT_EQ(r.max_tokens, 20);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.session_id, "u-1");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.n, 1);
}

TEST(AnthropicRequest, LastAssistantMessageIsThePrefill) {
  ParsedRequest r = parse_messages_body(
      R"({"max_tokens": 5, "system": "S", "messages": [{"role": "user", "content": "Hi"},
          {"role": "assistant", "content": "Once upon"}]})",
      defaults());
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages.back()["role"], "user");
  EXPECT_EQ(r.assistant_prefill, "Once upon");
}

TEST(AnthropicRequest, CountTokensNeedsNoMaxTokens) {
  ParsedRequest r = parse_count_tokens_body(
      R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})", defaults());
  EXPECT_EQ(r.messages.size(), 1u);
}

TEST(AnthropicRequest, BadInputNamesTheProblem) {
  struct Case {
    const char* body;
    const char* param;
    const char* words;  // part of the message
  };
  const Case cases[] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "max_tokens", "max_tokens"},
      {R"({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens", ""},
      {R"({"max_tokens": 513, "messages": [{"role": "user", "content": "x"}]})", "max_tokens", ""},
      {R"({"max_tokens": 5})", "messages", "messages"},
      {R"({"max_tokens": 5, "messages": []})", "messages", ""},
      {R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages",
       "role"},
      {R"({"max_tokens": 5, "messages": [{"role": "user"}]})", "messages", "content"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": 5}]})", "messages.0.content",
       ""},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]})",
       "messages.0.content", "image"},
      {R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages.0.content", "text"},
      {R"({"max_tokens": 5, "system": 3, "messages": [{"role": "user", "content": "x"}]})",
       "system", ""},
      {R"({"max_tokens": 5, "temperature": 1.5, "messages": [{"role": "user", "content": "x"}]})",
       "temperature", ""},
      {R"({"max_tokens": 5, "stop_sequences": "x", "messages": [{"role": "user", "content": "x"}]})",
       "stop_sequences", ""},
      {R"({"max_tokens": 5, "stop_sequences": [""], "messages": [{"role": "user", "content": "x"}]})",
       "stop_sequences", ""},
      {R"({"max_tokens": 5, "metadata": 1, "messages": [{"role": "user", "content": "x"}]})",
       "metadata", ""},
      {R"({"max_tokens": 5, "tools": [{"name": "f"}], "messages": [{"role": "user", "content": "x"}]})",
       "tools", "tool use"},
      {R"([1])", "", ""},
      {R"({"max_tokens": )", "", ""},
  };
  for (const Case& c : cases) {
    ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.words), std::string::npos) << e.message;
  }
}

ResponseContext message_context() {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Messages;
  ctx.id = "msg_7";
  ctx.model = "stories";
  ctx.prompt_tokens = 9;
  ctx.stop_sequences = {"END"};
  return ctx;
}

GenerationOutcome outcome(FinishReason reason, std::string matched_stop = "") {
  GenerationOutcome o;
  o.text = "Hello";
  o.finish_reason = reason;
  o.matched_stop = std::move(matched_stop);
  o.prompt_tokens = 9;
  o.cached_tokens = 4;
  o.completion_tokens = 3;
  return o;
}

TEST(AnthropicFormat, MessageShapeAndStopReasons) {
  const ResponseContext ctx = message_context();
  json m = anthropic_message(ctx, outcome(FinishReason::Length));
  EXPECT_EQ(m, json::parse(R"({"id": "msg_7", "type": "message", "role": "assistant",
      "model": "stories", "content": [{"type": "text", "text": "Hello"}],
      "stop_reason": "max_tokens", "stop_sequence": null,
      "usage": {"input_tokens": 9, "output_tokens": 3, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 4}})"));
  EXPECT_EQ(anthropic_message(ctx, outcome(FinishReason::Stop))["stop_reason"], "end_turn");
  json stopped = anthropic_message(ctx, outcome(FinishReason::Stop, "END"));
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], "END");
  // A chat template's turn-end string is not the client's stop sequence: end_turn.
  EXPECT_EQ(anthropic_message(ctx, outcome(FinishReason::Stop, "\nuser:"))["stop_reason"],
            "end_turn");
  EXPECT_EQ(full_response(ctx, {outcome(FinishReason::Length)}), m);
}

// Splits "event: X\ndata: {...}\n\n" blocks into (name, payload) pairs; fails on anything else.
std::vector<std::pair<std::string, json>> named_events(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  std::istringstream in(sse);
  std::string event, data, blank;
  while (std::getline(in, event)) {
    EXPECT_EQ(event.rfind("event: ", 0), 0u) << event;
    EXPECT_TRUE(std::getline(in, data));
    EXPECT_EQ(data.rfind("data: ", 0), 0u) << data;
    EXPECT_TRUE(std::getline(in, blank));
    EXPECT_EQ(blank, "");
    out.emplace_back(event.substr(7), json::parse(data.substr(6)));
  }
  return out;
}

TEST(AnthropicFormat, StreamIsTheSdksEventSequence) {
  const ResponseContext ctx = message_context();
  const GenerationOutcome o = outcome(FinishReason::Stop, "END");
  const std::string sse = stream_opening(ctx, 1) + stream_text(ctx, 0, "Hel", nullptr) +
                          stream_text(ctx, 0, "", nullptr) + stream_text(ctx, 0, "lo", nullptr) +
                          stream_choice_end(ctx, 0, o) + stream_closing(ctx, {o});
  auto events = named_events(sse);
  std::vector<std::string> names;
  for (const auto& [name, payload] : events) {
    names.push_back(name);
    EXPECT_EQ(payload["type"], name);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"message_start", "content_block_start", "ping",
                                      "content_block_delta", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[0].second["message"]["usage"]["input_tokens"], 9);
  EXPECT_TRUE(events[0].second["message"]["content"].empty());
  EXPECT_EQ(events[1].second["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[3].second["delta"], json({{"type", "text_delta"}, {"text", "Hel"}}));
  EXPECT_EQ(events[6].second["delta"],
            json({{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}}));
  EXPECT_EQ(events[6].second["usage"]["output_tokens"], 3);
}

TEST(AnthropicFormat, ErrorsInAnthropicsShape) {
  ApiError e;
  e.status = 400;
  e.message = "max_tokens: Field required";
  e.param = "max_tokens";
  EXPECT_EQ(anthropic_error_body(e),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                            "message": "max_tokens: Field required"}})"));
  const std::pair<int, const char*> types[] = {
      {401, "authentication_error"}, {404, "not_found_error"}, {413, "request_too_large"},
      {429, "rate_limit_error"},     {500, "api_error"},       {503, "overloaded_error"},
      {405, "invalid_request_error"}};
  for (const auto& [status, type] : types) {
    e.status = status;
    EXPECT_EQ(anthropic_error_body(e)["error"]["type"], type) << status;
  }
  e.status = 503;
  auto events = named_events(stream_error(message_context(), e));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].first, "error");
  EXPECT_EQ(events[0].second["error"]["type"], "overloaded_error");
}

TEST(StreamError, OpenAiEndsWithTheErrorGenerateKeepsDone) {
  ApiError e;
  e.status = 503;
  e.message = "cancelled";
  e.code = "cancelled";
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Chat;
  const std::string openai = stream_error(ctx, e);
  EXPECT_EQ(openai.rfind("data: {\"error\":", 0), 0u) << openai;
  EXPECT_EQ(openai.find("[DONE]"), std::string::npos);
  ctx.flavor = ApiFlavor::Generate;
  EXPECT_NE(stream_error(ctx, e).find("data: [DONE]\n\n"), std::string::npos);
}

}  // namespace
}  // namespace k25
