// Tool calling through the real k25-server on stories260K: requests with tools, tool_choice and
// tool turns are served in OpenAI's shape (the model answers nonsense, so its text is content),
// and malformed tools are a 400 naming the problem. That answers which are calls come back as
// tool_calls is shown in-process with a scripted model (tests/unit/tool_calls_server_test.cpp).
// With tool_choice "required" or a named function the output is constrained to a call, so even
// this model's answers are calls that parse, of the right tool, whole and streamed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
   "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
   "properties": {"query": {"type": "string"}}}}}])");

class ToolServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    if (std::filesystem::exists(model_path())) {
      server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                   "--model", model_path(), "--threads", "1"});
    }
  }
  // A missing model fails every test (no skip).
  void SetUp() override { ASSERT_NE(server_, nullptr) << model_path() << " is absent"; }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  HttpResult chat(const json& extra) {
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                 {"max_tokens", 16},
                 {"temperature", 0}};
    body.update(extra);
    return http_call(server_->port(), "POST", "/v1/chat/completions", body.dump());
  }
  static ServerProcess* server_;
};
ServerProcess* ToolServer::server_ = nullptr;

// An OpenAI chat.completion message: content a string (or null with calls), any tool_calls
// well formed, finish_reason from OpenAI's set.
void expect_openai_chat_shape(const json& response) {
  ASSERT_EQ(response["object"], "chat.completion");
  const json& choice = response["choices"][0];
  const json& message = choice["message"];
  EXPECT_EQ(message["role"], "assistant");
  const std::string finish = choice["finish_reason"];
  EXPECT_TRUE(finish == "stop" || finish == "length" || finish == "tool_calls") << finish;
  if (message.contains("tool_calls")) {
    EXPECT_EQ(finish, "tool_calls");
    for (const json& call : message["tool_calls"]) {
      EXPECT_EQ(call["type"], "function");
      EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>()).is_object());
    }
  } else {
    EXPECT_TRUE(message["content"].is_string());
    EXPECT_NE(finish, "tool_calls");
  }
}

TEST_F(ToolServer, ARequestWithToolsIsServedInOpenAisShape) {
  for (const json& choice : {json("auto"), json("none"), json("required"),
                             json{{"type", "function"}, {"function", {{"name", "search"}}}}}) {
    HttpResult r = chat({{"tools", kTools}, {"tool_choice", choice}});
    ASSERT_EQ(r.status, 200) << r.body;
    expect_openai_chat_shape(json::parse(r.body));
  }
}

TEST_F(ToolServer, AStreamWithToolsEndsWithAFinishReasonAndDone) {
  HttpResult r = chat({{"tools", kTools}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  json last = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(last["choices"][0]["finish_reason"].is_string()) << last.dump();
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(json::parse(events[i])["object"], "chat.completion.chunk");
  }
}

TEST_F(ToolServer, AConversationWithToolTurnsIsAccepted) {
  json messages = json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"}])");
  HttpResult r = chat({{"tools", kTools}, {"messages", messages}});
  ASSERT_EQ(r.status, 200) << r.body;
  expect_openai_chat_shape(json::parse(r.body));
}

TEST_F(ToolServer, TheModelsToolCallFormatIsShown) {
  HttpResult r = http_call(server_->port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  // stories260K has no chat template: the Hermes format is the default.
  EXPECT_EQ(json::parse(r.body)["data"][0]["meta"]["tool_call_format"], "hermes");
}

TEST_F(ToolServer, MalformedToolsAre400NamingTheProblem) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"tools", {{{"type", "function"}, {"function", {{"parameters", json::object()}}}}}}},
       "tools: tools[0].function.name is required"},
      {{{"tools",
         {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "not a schema"}}}}}}},
       "tools: tools[0].function.parameters must be a JSON schema object"},
      {{{"tools", json::array({kTools[0], kTools[0]})}},
       "tools: two tools are named 'get_weather'"},
      {{{"tools", kTools},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "delete_all"}}}}}},
       "tool_choice: names the function 'delete_all', which is not in 'tools'"},
      {{{"tool_choice", "required"}}, "tool_choice: a required tool call needs 'tools'"},
  };
  for (const auto& [extra, message] : cases) {
    HttpResult r = chat(extra);
    EXPECT_EQ(r.status, 400) << extra.dump();
    EXPECT_EQ(json::parse(r.body)["error"]["message"], message);
  }
}

// The calls of a streamed answer, put together from their deltas by index; the finish reason.
std::pair<json, std::string> streamed_calls(const std::string& body) {
  json calls = json::array();
  std::string finish;
  for (const std::string& event : sse_data(body)) {
    if (event == "[DONE]") break;
    const json chunk = json::parse(event);
    const json& choice = chunk["choices"][0];
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
    if (!choice["delta"].contains("tool_calls")) continue;
    for (const json& delta : choice["delta"]["tool_calls"]) {
      const size_t index = delta["index"];
      while (calls.size() <= index) calls.push_back(json::object());
      calls[index] = delta;
    }
  }
  return {calls, finish};
}

// One call of get_weather or search (or of `only`) whose arguments fit the tool's schema.
void expect_valid_call(const json& call, const std::string& only, const std::string& where) {
  EXPECT_EQ(call["type"], "function") << where;
  EXPECT_FALSE(call["id"].get<std::string>().empty()) << where;
  const std::string name = call["function"]["name"];
  if (!only.empty()) {
    EXPECT_EQ(name, only) << where;
  }
  json arguments;
  ASSERT_NO_THROW(arguments = json::parse(call["function"]["arguments"].get<std::string>()))
      << where << ": " << call.dump();
  ASSERT_TRUE(arguments.is_object()) << where;
  if (name == "get_weather") {
    ASSERT_TRUE(arguments.contains("city")) << where << ": " << call.dump();
    EXPECT_TRUE(arguments["city"].is_string()) << where;
  } else {
    ASSERT_EQ(name, "search") << where;
    if (arguments.contains("query")) {
      EXPECT_TRUE(arguments["query"].is_string()) << where;
    }
  }
}

TEST_F(ToolServer, ForcedCallsAlwaysParseIntoCallsOfTheRightTool) {
  const json named = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (const json& choice : {json("required"), named}) {
      for (bool stream : {false, true}) {
        const std::string where =
            "seed " + std::to_string(seed) + " " + choice.dump() + (stream ? " streamed" : "");
        const std::string only = choice.is_object() ? "get_weather" : "";
        HttpResult r = chat({{"tools", kTools},
                             {"tool_choice", choice},
                             {"max_tokens", 200},
                             {"temperature", 1},
                             {"seed", seed},
                             {"stream", stream}});
        ASSERT_EQ(r.status, 200) << where << ": " << r.body;
        json calls;
        std::string finish;
        if (stream) {
          std::tie(calls, finish) = streamed_calls(r.body);
        } else {
          const json response = json::parse(r.body);
          const json& c = response["choices"][0];
          calls = c["message"].value("tool_calls", json::array());
          finish = c["finish_reason"];
          EXPECT_TRUE(c["message"]["content"].is_null()) << where << ": " << r.body;
        }
        EXPECT_EQ(finish, "tool_calls") << where << ": " << r.body;
        ASSERT_FALSE(calls.empty()) << where << ": " << r.body;
        for (const json& call : calls) expect_valid_call(call, only, where);
      }
    }
  }
}

TEST_F(ToolServer, ForcedCallWithoutParallelCallsIsOneCall) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    HttpResult r = chat({{"tools", kTools},
                         {"tool_choice", "required"},
                         {"parallel_tool_calls", false},
                         {"max_tokens", 200},
                         {"temperature", 1},
                         {"seed", seed}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json calls = json::parse(r.body)["choices"][0]["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.body;
    expect_valid_call(calls[0], "", "seed " + std::to_string(seed));
  }
}

TEST_F(ToolServer, AForcedCallWhoseSchemaCannotBeEnforcedIs400) {
  json tools = kTools;
  tools[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  HttpResult r = chat({{"tools", tools}, {"tool_choice", "required"}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"]["message"],
            "tools[0].function.parameters: json schema: at /properties/city: 'pattern' is not "
            "supported");
  // Not forced, the schema is only shown to the template.
  EXPECT_EQ(chat({{"tools", tools}}).status, 200);
}

}  // namespace
}  // namespace k25::testing
