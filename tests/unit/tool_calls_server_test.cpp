// Tool calls through the HTTP API, in-process, with a model that answers a scripted text: the
// answer comes back as OpenAI tool_calls, whole and streamed, and tool_choice "none" leaves it
// as content.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../integration/server_process.h"
#include "capi_engine.h"
#include "engine/engine.h"
#include "in_process_server.h"
#include "model/model.h"
#include "server/api.h"

namespace k25 {
namespace {

using nlohmann::json;
using testing::http_call;
using testing::HttpResult;

// Letters for prompts, then the script: after any other token comes script[0], after script[i]
// script[i + 1], after the last one the end of text. The template text makes the server pick the
// Hermes call format.
class ScriptedModel : public Model {
 public:
  explicit ScriptedModel(std::vector<std::string> script) : tokenizer_(vocab(script)) {
    n_script_ = static_cast<int>(script.size());
    config_.name = "scripted";
    config_.n_vocab = tokenizer_.n_vocab();
    config_.dim = 4;
    config_.n_layers = 1;
    config_.n_heads = 1;
    config_.n_kv_heads = 1;
    config_.head_dim = 1;
    config_.context_length = 256;
  }
  const ModelConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
               ThreadPool&) override {
    for (const BatchToken& t : batch) {
      const float token = static_cast<float>(t.token);
      kv.store(t.seq, 0, t.pos, &token, &token, 1);
      if (!t.want_logits) continue;
      for (int i = 0; i < config_.n_vocab; ++i) logits[i] = 0.0f;
      logits[next(t.token)] = 10.0f;
      logits += config_.n_vocab;
    }
  }

 private:
  static constexpr TokenId kEos = 2;
  static Vocab vocab(const std::vector<std::string>& script) {
    Vocab v;
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
    for (char c = 'a'; c <= 'z'; ++c) {
      v.tokens.push_back(std::string(1, c));
      v.types.push_back(TokenType::Normal);
    }
    for (const std::string& piece : script) {
      v.tokens.push_back(piece);
      v.types.push_back(TokenType::Normal);
    }
    v.scores.assign(v.tokens.size(), 0.0f);
    v.unk = 0;
    v.bos = 1;
    v.eos = kEos;
    v.add_bos = true;
    v.chat_template = "{{ '<tool_call>' }}";
    return v;
  }
  TokenId first_script_token() const { return config_.n_vocab - n_script_; }
  TokenId next(TokenId t) const {
    if (t < first_script_token()) return first_script_token();
    return t + 1 < config_.n_vocab ? t + 1 : kEos;
  }

  ModelConfig config_;
  Tokenizer tokenizer_;
  int n_script_ = 0;
};

const std::vector<std::string> kCallScript = {"Checking.", "\n<tool_call>\n",
                                              R"({"name": "get_weather", "arguments": )",
                                              R"({"city": "Paris"}})", "\n</tool_call>"};

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

struct ScriptedServer {
  explicit ScriptedServer(std::vector<std::string> script) : model(std::move(script)) {
    EngineOptions o;
    o.n_threads = 1;
    engine = std::make_unique<testing::CApiEngine>(model, o);
    server.api().set_engine(engine->handle(), engine->tokenizer());
  }
  HttpResult chat(json extra) {
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "weather"}}})},
                 {"temperature", 0},
                 {"max_tokens", 20}};
    body.update(extra);
    return http_call(server.port(), "POST", "/v1/chat/completions", body.dump());
  }

  ScriptedModel model;
  testing::InProcessServer server{[] {
    ServerConfig c;
    c.log_requests = false;
    return c;
  }()};
  std::unique_ptr<testing::CApiEngine> engine;
};

TEST(ToolCallsServer, AnAnswerWithACallComesBackAsToolCalls) {
  ScriptedServer s(kCallScript);
  HttpResult r = s.chat({{"tools", kTools}});
  ASSERT_EQ(r.status, 200) << r.body;
  json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
  json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city":"Paris"})");
  const std::string id = call["id"];
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(id.size(), 29u);
}

TEST(ToolCallsServer, OnlyACallMeansNullContent) {
  ScriptedServer s({"<tool_call>", R"({"name": "get_weather", "arguments": {}})", "</tool_call>"});
  json choice = json::parse(s.chat({{"tools", kTools}}).body)["choices"][0];
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{}");
}

TEST(ToolCallsServer, WithoutToolsOrWithToolChoiceNoneTheTextIsContent) {
  ScriptedServer s(kCallScript);
  std::string text;
  for (const std::string& piece : kCallScript) text += piece;
  for (const json& extra : {json::object(), json{{"tools", kTools}, {"tool_choice", "none"}}}) {
    json choice = json::parse(s.chat(extra).body)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_EQ(choice["message"]["content"], text);
    EXPECT_FALSE(choice["message"].contains("tool_calls"));
  }
}

TEST(ToolCallsServer, AStreamedCallArrivesAsAToolCallsDelta) {
  ScriptedServer s(kCallScript);
  HttpResult r = s.chat({{"tools", kTools}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  std::string content;
  json calls = json::array();
  std::string finish;
  for (const std::string& data : testing::sse_data(r.body)) {
    if (data == "[DONE]") continue;
    json chunk = json::parse(data);
    const json& choice = chunk["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"];
    if (delta.contains("tool_calls")) {
      for (const json& c : delta["tool_calls"]) calls.push_back(c);
    }
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 1u) << r.body;
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ToolCallsServer, MalformedToolsAre400) {
  ScriptedServer s(kCallScript);
  HttpResult r =
      s.chat({{"tools", {{{"type", "function"}, {"function", {{"description", "x"}}}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "tools: tools[0].function.name is required");
  EXPECT_EQ(json::parse(r.body)["error"]["param"], "tools");
}

}  // namespace
}  // namespace k25
