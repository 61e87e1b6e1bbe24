// Tool calling through the real k25-server on stories260K: requests with tools, tool_choice and
// tool turns are served in OpenAI's shape (the model answers nonsense, so its text is content),
// and malformed tools are a 400 naming the problem. That answers which are calls come back as
// tool_calls is shown in-process with a scripted model (tests/unit/tool_calls_server_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace k25::testing
