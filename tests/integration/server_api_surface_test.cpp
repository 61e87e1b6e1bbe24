// The real k25-server on 127.0.0.1 with stories260K: the OpenAI fields beyond the basics
// (logit_bias, presence/frequency penalties, n, max_tokens defaults, /v1/models/{id}, errors
// instead of unknown finish reasons) and Anthropic's Messages API (/v1/messages, streaming
// events, count_tokens, errors, x-api-key).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

std::vector<std::string> base_args() {
  return {"--config",  std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
          "--model",   model_path(),
          "--threads", "1"};
}

class ApiSurface : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    if (std::filesystem::exists(model_path())) server_ = new ServerProcess(base_args());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  // A missing model fails the test (scripts/setup.sh provides ../shared).
  void SetUp() override { ASSERT_NE(server_, nullptr) << model_path() << " is missing"; }
  int port() const { return server_->port(); }
  HttpResult post(const std::string& target, const json& body,
                  const std::map<std::string, std::string>& headers = {}) {
    return http_call(port(), "POST", target, body.dump(), headers);
  }
  json post_ok(const std::string& target, const json& body) {
    HttpResult r = post(target, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  HttpResult get(const std::string& target) { return http_call(port(), "GET", target); }
  json model_entry() { return json::parse(get("/v1/models").body)["data"][0]; }
  int context_size() { return model_entry()["meta"]["n_ctx"]; }
  // The text of each token id, looked up once (stories260K has 512 tokens).
  const std::vector<std::string>& pieces() {
    static std::vector<std::string> all;
    if (all.empty()) {
      const int n_vocab = model_entry()["meta"]["n_vocab"];
      for (int id = 0; id < n_vocab; ++id) {
        all.push_back(json::parse(post("/detokenize", {{"tokens", {id}}}).body)["content"]);
      }
    }
    return all;
  }
  // The id of a token whose text is `piece` and no other token's.
  int unique_id_of(const std::string& piece) {
    int found = -1;
    for (size_t id = 0; id < pieces().size(); ++id) {
      if (pieces()[id] != piece) continue;
      if (found >= 0) return -1;
      found = static_cast<int>(id);
    }
    return found;
  }

  static ServerProcess* server_;
};
ServerProcess* ApiSurface::server_ = nullptr;

void expect_openai_error(const HttpResult& r, int status, const std::string& param) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << r.body;
  }
}

// ---- /v1/models/{id} -------------------------------------------------------------------------

TEST_F(ApiSurface, ModelByIdIsTheListEntry) {
  const json entry = model_entry();
  const std::string id = entry["id"];
  HttpResult r = get("/v1/models/" + id);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), entry);

  HttpResult unknown = get("/v1/models/gpt-nonexistent");
  expect_openai_error(unknown, 404, "model");
  json e = json::parse(unknown.body)["error"];
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_NE(e["message"].get<std::string>().find("gpt-nonexistent"), std::string::npos);
  EXPECT_EQ(http_call(port(), "POST", "/v1/models/" + id, "{}").status, 405);
}

// ---- max_tokens ------------------------------------------------------------------------------

TEST_F(ApiSurface, OmittedMaxTokensMeansTheRestOfTheContext) {
  const int n_ctx = context_size();
  json j = post_ok("/v1/completions",
                   {{"prompt", "Once upon a time"}, {"temperature", 0}, {"ignore_eos", true}});
  const int prompt = j["usage"]["prompt_tokens"];
  EXPECT_EQ(j["usage"]["completion_tokens"], n_ctx - prompt);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");

  json g = post_ok("/generate",
                   {{"prompt", "Once upon a time"}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(g["usage"]["completion_tokens"], n_ctx - g["usage"]["prompt_tokens"].get<int>());
}

TEST_F(ApiSurface, MaxTokensBeyondTheContextIs400) {
  const int n_ctx = context_size();
  json ok = post_ok("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1}});
  const int prompt = ok["usage"]["prompt_tokens"];
  // Exactly what fits is fine; one more is refused, naming the field the client used.
  json fits = post_ok("/v1/completions", {{"prompt", "Once upon a time"},
                                          {"max_tokens", n_ctx - prompt},
                                          {"temperature", 0},
                                          {"ignore_eos", true}});
  EXPECT_EQ(fits["usage"]["completion_tokens"], n_ctx - prompt);
  HttpResult r =
      post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", n_ctx - prompt + 1}});
  expect_openai_error(r, 400, "max_tokens");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "context_length_exceeded");
  HttpResult chat = post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_completion_tokens", n_ctx}});
  expect_openai_error(chat, 400, "max_completion_tokens");
}

// ---- logit_bias, presence_penalty, frequency_penalty -----------------------------------------

TEST_F(ApiSurface, LogitBiasPlus100ForcesAToken) {
  const int id = unique_id_of(" the");
  ASSERT_GE(id, 0);
  for (const char* target : {"/v1/completions", "/generate"}) {
    SCOPED_TRACE(target);
    json body = {{"prompt", "Once upon a time"},
                 {"max_tokens", 6},
                 {"temperature", 0},
                 {"logit_bias", {{std::to_string(id), 100}}}};
    json j = post_ok(target, body);
    const std::string text =
        std::string(target) == "/generate" ? j["text"] : j["choices"][0]["text"];
    EXPECT_EQ(text, " the the the the the the");
  }
  json chat =
      post_ok("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                       {"max_tokens", 3},
                                       {"temperature", 0},
                                       {"logit_bias", {{std::to_string(id), 100}}}});
  EXPECT_EQ(chat["choices"][0]["message"]["content"], " the the the");
}

TEST_F(ApiSurface, LogitBiasMinus100BansTheArgmaxAndTheRunnerUpWins) {
  json base = post_ok(
      "/v1/completions",
      {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0}, {"logprobs", 5}});
  const std::string argmax = base["choices"][0]["logprobs"]["tokens"][0];
  // Ban every token with the argmax's text (a byte token may spell it too); the most likely of
  // the other texts must come out.
  json bias = json::object();
  for (size_t id = 0; id < pieces().size(); ++id) {
    if (pieces()[id] == argmax) bias[std::to_string(id)] = -100;
  }
  ASSERT_FALSE(bias.empty()) << argmax;
  std::string runner_up;
  double best = -1e30;
  for (const auto& [piece, lp] : base["choices"][0]["logprobs"]["top_logprobs"][0].items()) {
    if (piece != argmax && lp.get<double>() > best) {
      best = lp.get<double>();
      runner_up = piece;
    }
  }
  ASSERT_FALSE(runner_up.empty());
  json banned = post_ok("/v1/completions", {{"prompt", "Once upon a time"},
                                            {"max_tokens", 1},
                                            {"temperature", 0},
                                            {"logit_bias", bias}});
  EXPECT_EQ(banned["choices"][0]["text"], runner_up);
}

TEST_F(ApiSurface, PenaltiesChangeRepetitiveOutput) {
  json body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string plain = post_ok("/v1/completions", body)["choices"][0]["text"];
  body["frequency_penalty"] = 2.0;
  const std::string frequency = post_ok("/v1/completions", body)["choices"][0]["text"];
  body.erase("frequency_penalty");
  body["presence_penalty"] = 2.0;
  const std::string presence = post_ok("/v1/completions", body)["choices"][0]["text"];
  EXPECT_NE(frequency, plain);
  EXPECT_NE(presence, plain);
  // Deterministic: greedy with the same penalties gives the same text.
  EXPECT_EQ(post_ok("/v1/completions", body)["choices"][0]["text"], presence);
}

TEST_F(ApiSurface, BadSamplingFieldsAre400) {
  const json cases[] = {
      {{"logit_bias", {{"abc", 1}}}},   {{"logit_bias", {{"-1", 1}}}},
      {{"logit_bias", {{"99999", 1}}}}, {{"logit_bias", {{"01", 1}}}},
      {{"logit_bias", {{"5", 101}}}},   {{"logit_bias", {{"5", "x"}}}},
      {{"logit_bias", {1, 2}}},
  };
  for (const json& extra : cases) {
    json body = {{"prompt", "Once"}, {"max_tokens", 2}};
    body.update(extra);
    SCOPED_TRACE(body.dump());
    expect_openai_error(post("/v1/completions", body), 400, "logit_bias");
  }
  expect_openai_error(post("/v1/completions", {{"prompt", "a"}, {"presence_penalty", 2.5}}), 400,
                      "presence_penalty");
  expect_openai_error(post("/generate", {{"prompt", "a"}, {"frequency_penalty", -3}}), 400,
                      "frequency_penalty");
}

// ---- n ---------------------------------------------------------------------------------------

TEST_F(ApiSurface, NChoicesAreIndependentAndUsageIsSummed) {
  json body = {{"prompt", "Once upon a time"},
               {"max_tokens", 8},
               {"temperature", 1.0},
               {"seed", 5},
               {"ignore_eos", true}};
  const std::string single = post_ok("/v1/completions", body)["choices"][0]["text"];
  body["n"] = 3;
  json j = post_ok("/v1/completions", body);
  ASSERT_EQ(j["choices"].size(), 3u);
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["finish_reason"], "length");
    texts.insert(j["choices"][i]["text"].get<std::string>());
  }
  EXPECT_EQ(j["choices"][0]["text"], single);  // choice i samples with seed + i
  EXPECT_GT(texts.size(), 1u);
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  json one = post_ok("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1}});
  EXPECT_EQ(j["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);  // the prompt once
  EXPECT_EQ(j["usage"]["total_tokens"], one["usage"]["prompt_tokens"].get<int>() + 24);
  // The same request again gives the same three choices.
  EXPECT_EQ(post_ok("/v1/completions", body)["choices"], j["choices"]);

  expect_openai_error(post("/v1/completions", {{"prompt", "a"}, {"n", 17}}), 400, "n");
  expect_openai_error(post("/v1/chat/completions",
                           {{"messages", {{{"role", "user"}, {"content", "a"}}}}, {"n", 0}}),
                      400, "n");
}

TEST_F(ApiSurface, NChoicesStreamInterleavedByIndex) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
               {"max_tokens", 12},
               {"temperature", 1.0},
               {"seed", 11},
               {"n", 2},
               {"ignore_eos", true}};
  json whole = post_ok("/v1/chat/completions", body);
  ASSERT_EQ(whole["choices"].size(), 2u);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 24);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  HttpResult s = post("/v1/chat/completions", body);
  ASSERT_EQ(s.status, 200);
  std::vector<std::string> events = sse_data(s.body);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text[2];
  int roles[2] = {0, 0}, finishes[2] = {0, 0};
  json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    if (e["choices"].empty()) {
      usage = e["usage"];
      continue;
    }
    ASSERT_EQ(e["choices"].size(), 1u);
    const int index = e["choices"][0]["index"];
    ASSERT_TRUE(index == 0 || index == 1) << events[i];
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("role")) ++roles[index];
    if (delta.contains("content")) text[index] += delta["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) {
      ++finishes[index];
      EXPECT_EQ(e["choices"][0]["finish_reason"], "length");
    }
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(roles[i], 1);
    EXPECT_EQ(finishes[i], 1);
    EXPECT_EQ(text[i], whole["choices"][i]["message"]["content"]);
  }
  EXPECT_EQ(usage["completion_tokens"], 24);
}

// ---- Anthropic Messages ----------------------------------------------------------------------

const std::map<std::string, std::string> kAnthropicHeaders = {{"anthropic-version", "2023-06-01"}};

json story_message(int max_tokens) {
  return {{"model", "claude-anything"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"system", "You tell stories."},
          {"messages", {{{"role", "user"}, {"content", "Tell me about a cat."}}}}};
}

void expect_anthropic_error(const HttpResult& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
  EXPECT_FALSE(j.contains("param")) << r.body;
}

TEST_F(ApiSurface, MessagesReturnsAnthropicsShape) {
  HttpResult r = post("/v1/messages", story_message(10), kAnthropicHeaders);
  ASSERT_EQ(r.status, 200) << r.body;
  json m = json::parse(r.body);
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], model_entry()["id"]);
  ASSERT_EQ(m["content"].size(), 1u);
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_FALSE(m["content"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_EQ(m["usage"]["output_tokens"], 10);
  EXPECT_TRUE(m["usage"]["cache_read_input_tokens"].is_number());
  // count_tokens renders the same conversation: the same input tokens.
  json counted = post_ok("/v1/messages/count_tokens", story_message(10));
  EXPECT_EQ(counted, json({{"input_tokens", m["usage"]["input_tokens"]}}));

  // The same conversation through /v1/chat/completions gives the same prompt and text.
  json chat =
      post_ok("/v1/chat/completions", {{"messages",
                                        {{{"role", "system"}, {"content", "You tell stories."}},
                                         {{"role", "user"}, {"content", "Tell me about a cat."}}}},
                                       {"max_tokens", 10},
                                       {"temperature", 0}});
  EXPECT_EQ(chat["usage"]["prompt_tokens"], m["usage"]["input_tokens"]);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], m["content"][0]["text"]);
}

TEST_F(ApiSurface, MessagesSystemBlocksTextBlocksAndPrefill) {
  json blocks = story_message(8);
  blocks["system"] = {{{"type", "text"}, {"text", "You tell "}},
                      {{"type", "text"}, {"text", "stories."}}};
  blocks["messages"][0]["content"] = {{{"type", "text"}, {"text", "Tell me about a cat."}}};
  EXPECT_EQ(post_ok("/v1/messages/count_tokens", blocks),
            post_ok("/v1/messages/count_tokens", story_message(8)));
  EXPECT_EQ(post_ok("/v1/messages", blocks)["content"],
            post_ok("/v1/messages", story_message(8))["content"]);

  // A last assistant message is the start of the answer, which continues it.
  json prefill = story_message(8);
  prefill["messages"].push_back({{"role", "assistant"}, {"content", "Once upon a time"}});
  json with = post_ok("/v1/messages", prefill);
  json plain = post_ok("/v1/messages", story_message(8));
  EXPECT_GT(with["usage"]["input_tokens"].get<int>(), plain["usage"]["input_tokens"].get<int>());
  EXPECT_NE(with["content"][0]["text"], plain["content"][0]["text"]);
}

TEST_F(ApiSurface, MessagesStopSequence) {
  const std::string text = post_ok("/v1/messages", story_message(30))["content"][0]["text"];
  // A word from the middle of the greedy answer stops it there.
  const size_t space = text.find(' ', 6);
  ASSERT_NE(space, std::string::npos) << text;
  const std::string word = text.substr(space, text.find(' ', space + 1) - space);
  json body = story_message(30);
  body["stop_sequences"] = {"zzzz", word};
  json m = post_ok("/v1/messages", body);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], word);
  EXPECT_EQ(m["content"][0]["text"], text.substr(0, text.find(word)));
  // end_turn (an end token or the template's turn end) is in server_anthropic_test: greedy
  // stories260K does not end a story within its context.
}

// Anthropic's event sequence, with `event:` names matching the payloads' types.
TEST_F(ApiSurface, MessagesStreamEventOrder) {
  json whole = post_ok("/v1/messages", story_message(12));
  json body = story_message(12);
  body["stream"] = true;
  HttpResult s = post("/v1/messages", body, kAnthropicHeaders);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(s.headers["content-type"], "text/event-stream");
  std::vector<std::string> names;
  std::vector<json> payloads;
  std::istringstream in(s.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) names.push_back(line.substr(7));
    if (line.rfind("data: ", 0) == 0) payloads.push_back(json::parse(line.substr(6)));
  }
  ASSERT_EQ(names.size(), payloads.size());
  ASSERT_GE(names.size(), 7u);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(payloads[i]["type"], names[i]);
  EXPECT_EQ(names[0], "message_start");
  EXPECT_EQ(names[1], "content_block_start");
  EXPECT_EQ(names[2], "ping");
  const size_t n = names.size();
  EXPECT_EQ(names[n - 3], "content_block_stop");
  EXPECT_EQ(names[n - 2], "message_delta");
  EXPECT_EQ(names[n - 1], "message_stop");
  const json& start = payloads[0]["message"];
  EXPECT_EQ(start["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(start["role"], "assistant");
  EXPECT_TRUE(start["content"].empty());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], whole["usage"]["input_tokens"]);
  EXPECT_EQ(payloads[1]["content_block"], json({{"type", "text"}, {"text", ""}}));
  std::string text;
  for (size_t i = 3; i + 3 < n; ++i) {
    EXPECT_EQ(names[i], "content_block_delta");
    EXPECT_EQ(payloads[i]["index"], 0);
    EXPECT_EQ(payloads[i]["delta"]["type"], "text_delta");
    text += payloads[i]["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, whole["content"][0]["text"]);
  EXPECT_EQ(payloads[n - 2]["delta"]["stop_reason"], "max_tokens");
  EXPECT_TRUE(payloads[n - 2]["delta"]["stop_sequence"].is_null());
  EXPECT_EQ(payloads[n - 2]["usage"]["output_tokens"], 12);
  EXPECT_EQ(s.body.find("[DONE]"), std::string::npos);
}

TEST_F(ApiSurface, MessagesBadInputInAnthropicsShape) {
  json no_max = story_message(8);
  no_max.erase("max_tokens");
  HttpResult missing = post("/v1/messages", no_max);
  expect_anthropic_error(missing, 400, "invalid_request_error");
  EXPECT_NE(json::parse(missing.body)["error"]["message"].get<std::string>().find("max_tokens"),
            std::string::npos);

  json image = story_message(8);
  image["messages"][0]["content"] = {{{"type", "image"}, {"source", json::object()}}};
  json bad_role = story_message(8);
  bad_role["messages"][0]["role"] = "system";
  json tools = story_message(8);
  tools["tools"] = {{{"name", "f"}, {"input_schema", json::object()}}};
  json hot = story_message(8);
  hot["temperature"] = 1.5;
  json too_long = story_message(context_size());
  for (const json& body : {image, bad_role, tools, hot, too_long}) {
    SCOPED_TRACE(body.dump());
    expect_anthropic_error(post("/v1/messages", body), 400, "invalid_request_error");
  }
  expect_anthropic_error(http_call(port(), "POST", "/v1/messages", "{\"model\":"), 400,
                         "invalid_request_error");
  expect_anthropic_error(post("/v1/messages/count_tokens", {{"model", "m"}}), 400,
                         "invalid_request_error");
  expect_anthropic_error(http_call(port(), "GET", "/v1/messages"), 405, "invalid_request_error");
  expect_anthropic_error(post("/v1/messages/batches", story_message(8)), 404, "not_found_error");
}

// ---- API keys and shutdown --------------------------------------------------------------------

TEST(ApiSurfaceProcess, XApiKeyIsAcceptedLikeTheBearerKey) {
  ASSERT_TRUE(std::filesystem::exists(model_path())) << model_path() << " is missing";
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--api-key", "sk-ant-test"});
  ServerProcess server(args);
  const std::string body = story_message(4).dump();
  HttpResult none = http_call(server.port(), "POST", "/v1/messages", body, kAnthropicHeaders);
  expect_anthropic_error(none, 401, "authentication_error");
  HttpResult wrong = http_call(server.port(), "POST", "/v1/messages", body,
                               {{"x-api-key", "sk-ant-nope"}, {"anthropic-version", "2023-06-01"}});
  expect_anthropic_error(wrong, 401, "authentication_error");
  HttpResult right = http_call(server.port(), "POST", "/v1/messages", body,
                               {{"x-api-key", "sk-ant-test"}, {"anthropic-version", "2023-06-01"}});
  EXPECT_EQ(right.status, 200) << right.body;
  EXPECT_EQ(
      http_call(server.port(), "GET", "/v1/models", "", {{"x-api-key", "sk-ant-test"}}).status,
      200);
  EXPECT_EQ(http_call(server.port(), "POST", "/v1/messages", body,
                      {{"Authorization", "Bearer sk-ant-test"}})
                .status,
            200);
}

// Requests running or waiting in the engine, from /metrics.
int requests_in_engine(int port) {
  const std::string text = http_call(port, "GET", "/metrics").body;
  return static_cast<int>(metric_in(text, "k25_requests_running") +
                          metric_in(text, "k25_requests_waiting"));
}

// A request cancelled by the shutdown ends with the API's error, never finish_reason
// "cancelled": OpenAI streams get an error event (and no [DONE]), non-streaming calls a 503,
// Anthropic streams an `event: error`.
TEST(ApiSurfaceProcess, CancelledRequestsEndWithAnErrorNotAFinishReason) {
  ASSERT_TRUE(std::filesystem::exists(model_path())) << model_path() << " is missing";
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--shutdown-timeout-s", "0", "--debug-step-delay-ms", "20"});
  ServerProcess server(args);
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                     {"max_tokens", 400},
                     {"ignore_eos", true},
                     {"stream", true}};
  StreamingCall openai_stream(server.port(), "/v1/chat/completions", chat.dump());
  json message = story_message(400);
  message["stream"] = true;
  StreamingCall anthropic_stream(server.port(), "/v1/messages", message.dump());
  ASSERT_TRUE(openai_stream.read_until("\"content\""));
  ASSERT_TRUE(anthropic_stream.read_until("content_block_delta"));
  HttpResult whole;
  std::thread non_streaming([&] {
    json body = chat;
    body.erase("stream");
    whole = http_call(server.port(), "POST", "/v1/chat/completions", body.dump());
  });
  // SIGINT once the non-streaming request is in the engine too (not after a guessed delay).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool all_in = false;
  while (!(all_in = requests_in_engine(server.port()) >= 3) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(all_in) << "the third request never reached the engine";
  server.signal(SIGINT);
  non_streaming.join();
  EXPECT_TRUE(openai_stream.read_to_end());
  EXPECT_TRUE(anthropic_stream.read_to_end());

  std::vector<std::string> events = sse_data(openai_stream.body());
  ASSERT_FALSE(events.empty());
  json last = json::parse(events.back());
  EXPECT_EQ(last["error"]["code"], "cancelled") << openai_stream.body();
  EXPECT_EQ(openai_stream.body().find("\"finish_reason\":\"cancelled\""), std::string::npos);
  EXPECT_EQ(openai_stream.body().find("[DONE]"), std::string::npos);

  const std::string& a = anthropic_stream.body();
  const size_t error_at = a.rfind("event: error\ndata: ");
  ASSERT_NE(error_at, std::string::npos) << a;
  json error = json::parse(a.substr(error_at + 19, a.find('\n', error_at + 19) - error_at - 19));
  EXPECT_EQ(error["type"], "error");
  EXPECT_EQ(error["error"]["type"], "overloaded_error");
  EXPECT_EQ(a.find("message_stop"), std::string::npos);

  EXPECT_EQ(whole.status, 503) << whole.body;
  EXPECT_EQ(json::parse(whole.body)["error"]["code"], "cancelled");
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
}

}  // namespace
}  // namespace k25::testing
