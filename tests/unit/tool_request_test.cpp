// The tool-calling fields of a chat request: valid tools and tool_choice values are read,
// malformed ones are a 400 naming the problem; tool turns in the conversation are checked.
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request_parsing.h"

namespace k25 {
namespace {

using nlohmann::json;

const json kWeather = json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather", "parameters": {"type": "object", "properties": {"city":
    {"type": "string"}}, "required": ["city"]}}})");
const json kSearch =
    json::parse(R"({"type": "function", "function": {"name": "search", "strict": true}})");

json chat_body(json extra) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  body.update(extra);
  return body;
}

ParsedRequest parse(const json& body) {
  RequestDefaults d;
  d.context_size = 512;
  return parse_request_body(ApiFlavor::Chat, body.dump(), d);
}

// The 400's message for `body`.
std::string error_of(const json& body) {
  try {
    parse(body);
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    return e.error().message;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return "";
}

TEST(ToolRequest, ReadsToolsChoiceAndParallel) {
  ParsedRequest r = parse(chat_body({{"tools", {kWeather, kSearch}}}));
  EXPECT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.choice, ToolChoiceMode::Auto);
  EXPECT_TRUE(r.tools.parallel);
  EXPECT_TRUE(r.tools.parses_calls());
  EXPECT_FALSE(r.tools.forces_call());

  r = parse(chat_body({{"tools", {kWeather}}, {"tool_choice", "none"}}));
  EXPECT_FALSE(r.tools.parses_calls());
  r = parse(chat_body(
      {{"tools", {kWeather}}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}));
  EXPECT_TRUE(r.tools.forces_call());
  EXPECT_FALSE(r.tools.parallel);
  r = parse(
      chat_body({{"tools", {kWeather, kSearch}},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "search"}}}}}}));
  EXPECT_EQ(r.tools.choice, ToolChoiceMode::Named);
  EXPECT_EQ(r.tools.forced_name, "search");
  EXPECT_TRUE(r.tools.forces_call());

  r = parse(chat_body(json::object()));
  EXPECT_TRUE(r.tools.tools.empty());
  EXPECT_FALSE(r.tools.parses_calls());
  r = parse(chat_body({{"tools", nullptr}, {"tool_choice", "auto"}}));
  EXPECT_FALSE(r.tools.parses_calls());
}

TEST(ToolRequest, MalformedToolsAre400NamingTheProblem) {
  auto with_function = [](const char* key, json value) {
    json tool = kWeather;
    if (value.is_discarded()) {
      tool["function"].erase(key);
    } else {
      tool["function"][key] = value;
    }
    return chat_body({{"tools", {tool}}});
  };
  const json erase(json::value_t::discarded);
  EXPECT_EQ(error_of(with_function("name", erase)), "tools: tools[0].function.name is required");
  EXPECT_NE(error_of(with_function("name", "has space")).find("function.name must be 1 to 64"),
            std::string::npos);
  EXPECT_NE(error_of(with_function("name", 7)).find("function.name must be"), std::string::npos);
  EXPECT_EQ(error_of(with_function("parameters", "{}")),
            "tools: tools[0].function.parameters must be a JSON schema object");
  EXPECT_EQ(error_of(with_function("parameters", {{"type", "string"}})),
            "tools: tools[0].function.parameters must be a schema of type \"object\", got type "
            "\"string\"");
  EXPECT_EQ(error_of(with_function("description", 1)),
            "tools: tools[0].function.description must be a string");
  EXPECT_EQ(error_of(with_function("strict", "yes")),
            "tools: tools[0].function.strict must be true or false");
  EXPECT_EQ(error_of(chat_body({{"tools", {kWeather, kSearch, kWeather}}})),
            "tools: two tools are named 'get_weather'");
  EXPECT_EQ(error_of(chat_body({{"tools", kWeather}})),
            "tools: must be an array of {\"type\": \"function\", ...}");
  EXPECT_EQ(error_of(chat_body({{"tools", {1}}})), "tools: tools[0] must be an object");
  EXPECT_EQ(
      error_of(chat_body({{"tools", {{{"type", "code"}, {"function", kSearch["function"]}}}}})),
      "tools: tools[0].type must be \"function\"");
  EXPECT_EQ(error_of(chat_body({{"tools", {{{"type", "function"}}}}})),
            "tools: tools[0].function must be an object");
}

TEST(ToolRequest, MalformedToolChoiceIs400) {
  const json tools = {kWeather, kSearch};
  EXPECT_EQ(error_of(chat_body(
                {{"tools", tools},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}}})),
            "tool_choice: names the function 'other', which is not in 'tools'");
  EXPECT_EQ(error_of(chat_body({{"tools", tools}, {"tool_choice", "always"}})),
            "tool_choice: expected \"auto\", \"none\", \"required\" or a function, got "
            "\"always\"");
  EXPECT_EQ(error_of(chat_body({{"tools", tools}, {"tool_choice", {{"function", "x"}}}})),
            "tool_choice: an object must have \"type\": \"function\"");
  EXPECT_EQ(error_of(chat_body({{"tools", tools}, {"tool_choice", {{"type", "function"}}}})),
            "tool_choice: function.name must be a string");
  EXPECT_EQ(error_of(chat_body({{"tools", tools}, {"tool_choice", 3}})),
            "tool_choice: expected a string or an object");
  EXPECT_EQ(error_of(chat_body({{"tool_choice", "required"}})),
            "tool_choice: a required tool call needs 'tools'");
  EXPECT_EQ(error_of(chat_body({{"tools", tools}, {"parallel_tool_calls", "no"}})),
            "'parallel_tool_calls' must be true or false");
}

json conversation_with(json assistant, json tool) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "weather?"}}, assistant, tool})},
          {"tools", {kWeather}}};
}

const json kAssistantCall = json::parse(R"({"role": "assistant", "content": null, "tool_calls":
    [{"id": "Wz3kQ9pLm", "type": "function", "function": {"name": "get_weather",
    "arguments": "{\"city\": \"Paris\"}"}}]})");
const json kToolResult = json::parse(
    R"({"role": "tool", "tool_call_id": "Wz3kQ9pLm", "name": "get_weather", "content": "18C"})");

TEST(ToolRequest, ToolTurnsOfTheConversationAreAccepted) {
  ParsedRequest r = parse(conversation_with(kAssistantCall, kToolResult));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].content, "18C");
  // Arguments as an object (as Hugging Face conversations write them) are accepted too.
  json object_arguments = kAssistantCall;
  object_arguments["tool_calls"][0]["function"]["arguments"] = {{"city", "Paris"}};
  EXPECT_NO_THROW(parse(conversation_with(object_arguments, kToolResult)));
}

TEST(ToolRequest, MalformedToolTurnsAre400) {
  json call = kAssistantCall;
  call["tool_calls"][0].erase("id");
  EXPECT_EQ(error_of(conversation_with(call, kToolResult)),
            "messages: messages[1].tool_calls[0].id must be a non-empty string");
  call = kAssistantCall;
  call["tool_calls"][0]["function"].erase("name");
  EXPECT_EQ(error_of(conversation_with(call, kToolResult)),
            "messages: messages[1].tool_calls[0].function.name must be a non-empty string");
  call = kAssistantCall;
  call["tool_calls"][0]["function"]["arguments"] = 5;
  EXPECT_EQ(error_of(conversation_with(call, kToolResult)),
            "messages: messages[1].tool_calls[0].function.arguments must be a JSON string or an "
            "object");
  call = kAssistantCall;
  call["tool_calls"] = "get_weather";
  EXPECT_EQ(error_of(conversation_with(call, kToolResult)),
            "messages: messages[1].tool_calls must be an array");
  json result = kToolResult;
  result.erase("tool_call_id");
  EXPECT_EQ(error_of(conversation_with(kAssistantCall, result)),
            "messages: messages[2] (role 'tool') needs a string 'tool_call_id'");
  result["tool_call_id"] = "other";
  EXPECT_EQ(error_of(conversation_with(kAssistantCall, result)),
            "messages: messages[2] answers tool call 'other', which no earlier assistant message "
            "made");
}

}  // namespace
}  // namespace k25
