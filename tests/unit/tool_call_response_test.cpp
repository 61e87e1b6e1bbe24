// Tool calls in OpenAI's response shapes: ids, message.tool_calls, stream deltas, and the
// finish reason and null content of an answer that only made calls.
#include "server/tool_call_response.h"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "server/response_format.h"

namespace k25 {
namespace {

using nlohmann::json;

bool alphanumeric(const std::string& s) {
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(ToolCallResponse, IdsLookLikeOpenAisAndMistralsGetNineCharacters) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string id = new_tool_call_id(ToolCallFormat::Hermes);
    ASSERT_EQ(id.size(), 29u);
    EXPECT_EQ(id.rfind("call_", 0), 0u);
    EXPECT_TRUE(alphanumeric(id.substr(5)));
    seen.insert(id);
    const std::string mistral = new_tool_call_id(ToolCallFormat::Mistral);
    EXPECT_EQ(mistral.size(), 9u);
    EXPECT_TRUE(alphanumeric(mistral));
  }
  EXPECT_EQ(seen.size(), 100u);
  std::vector<ToolCall> calls = {{"kept", "f", "{}"}, {"", "g", "{}"}};
  assign_tool_call_ids(calls, ToolCallFormat::Hermes);
  EXPECT_EQ(calls[0].id, "kept");
  EXPECT_EQ(calls[1].id.size(), 29u);
}

ResponseContext chat_context() {
  ResponseContext ctx;
  ctx.flavor = ApiFlavor::Chat;
  ctx.id = "chatcmpl-1";
  return ctx;
}

TEST(ToolCallResponse, AnAnswerOfOnlyCallsHasNullContentAndFinishReasonToolCalls) {
  GenerationOutcome o;
  o.text = "<tool_call>...</tool_call>";
  o.tools = ToolCallParse{"", {{"call_1", "get_weather", R"({"city":"Paris"})"}}};
  json choice = full_response(chat_context(), o)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"],
            json::parse(R"([{"id": "call_1", "type": "function", "function": {"name":
                "get_weather", "arguments": "{\"city\":\"Paris\"}"}}])"));
  EXPECT_EQ(stream_final_chunks(chat_context(), o)[0]["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ToolCallResponse, WithoutCallsTheParsedContentAndTheEnginesFinishReasonStay) {
  GenerationOutcome o;
  o.text = "hello";
  o.finish_reason = FinishReason::Length;
  o.tools = ToolCallParse{"hello", {}};
  json choice = full_response(chat_context(), o)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["message"]["content"], "hello");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
}

TEST(ToolCallResponse, StreamDeltasCarryIndexIdTypeNameAndArguments) {
  json chunk = stream_tool_calls_chunk(chat_context(),
                                       {{"call_1", "f", "{}"}, {"call_2", "g", "{\"a\":1}"}});
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  const json& deltas = chunk["choices"][0]["delta"]["tool_calls"];
  ASSERT_EQ(deltas.size(), 2u);
  EXPECT_EQ(deltas[1], json::parse(R"({"index": 1, "id": "call_2", "type": "function",
                                       "function": {"name": "g", "arguments": "{\"a\":1}"}})"));
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
}

}  // namespace
}  // namespace k25
