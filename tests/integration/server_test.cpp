// The real k25-server on 127.0.0.1 with the stories260K model: every endpoint, streaming and
// not, the bad-input table, cancellation on disconnect, load, API keys, SIGTERM, the C API.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

#define REQUIRE_MODEL()                                                                    \
  do {                                                                                     \
    if (!std::filesystem::exists(model_path())) {                                          \
      GTEST_SKIP() << "SKIPPED: " << model_path()                                          \
                   << " is absent; put ../shared beside the checkout to run server tests"; \
    }                                                                                      \
  } while (0)

std::vector<std::string> base_args() {
  return {"--config",  std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
          "--model",   model_path(),
          "--threads", "1"};
}

class Server : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    if (std::filesystem::exists(model_path())) server_ = new ServerProcess(base_args());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { REQUIRE_MODEL(); }
  int port() const { return server_->port(); }
  HttpResult post(const std::string& target, const json& body,
                  const std::map<std::string, std::string>& headers = {}) {
    return http_call(port(), "POST", target, body.dump(), headers);
  }
  HttpResult get(const std::string& target) { return http_call(port(), "GET", target); }
  void expect_still_serving() {
    HttpResult r = get("/health");
    EXPECT_EQ(r.status, 200);
  }

  static ServerProcess* server_;
};
ServerProcess* Server::server_ = nullptr;

const json kGreedy = {{"prompt", "Once upon a time"}, {"max_tokens", 24}, {"temperature", 0}};

TEST_F(Server, HealthAndModels) {
  HttpResult health = get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body)["status"], "ok");
  HttpResult models = get("/v1/models");
  ASSERT_EQ(models.status, 200);
  json m = json::parse(models.body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_FALSE(m["data"][0]["id"].get<std::string>().empty());
}

TEST_F(Server, GenerateMatchesK25Run) {
  HttpResult r = post("/generate", kGreedy);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 24);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_GE(j["timings"]["total_ms"].get<double>(), j["timings"]["ttft_ms"].get<double>());
  EXPECT_EQ(j["flash"]["domain"], "default");
  EXPECT_EQ(j["flash"]["level"], 0);
  EXPECT_EQ(j["flash"]["priority"], 50);

  const std::string k25_run = std::string(K25_BIN_DIR) + "/k25-run";
  if (!std::filesystem::exists(k25_run)) GTEST_SKIP() << "k25-run not built: comparison SKIPPED";
  auto [rc, out] = run_command(k25_run + " generate -m " + model_path() +
                               " -p 'Once upon a time' -n 24 --temp 0 --json -t 1 2>/dev/null");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(j["text"], json::parse(out)["text"]);
}

TEST_F(Server, GenerateStreamsTheSameText) {
  std::string whole = json::parse(post("/generate", kGreedy).body)["text"];
  json body = kGreedy;
  body["stream"] = true;
  HttpResult r = post("/generate", body, {{"x-latency-sla", "gold"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  std::vector<std::string> events = sse_data(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += json::parse(events[i])["text"];
  EXPECT_EQ(text, whole);
  json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["completion_tokens"], 24);
  EXPECT_EQ(last["flash"]["priority"], 100);
}

TEST_F(Server, StopStringsAndSeeds) {
  json body = kGreedy;
  body["stop"] = {" little"};
  json j = json::parse(post("/generate", body).body);
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_EQ(j["text"].get<std::string>().find("little"), std::string::npos);
  EXPECT_FALSE(j["text"].get<std::string>().empty());

  json seeded = {{"prompt", "Once"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", 1234}};
  EXPECT_EQ(json::parse(post("/generate", seeded).body)["text"],
            json::parse(post("/generate", seeded).body)["text"]);
}

TEST_F(Server, Completions) {
  HttpResult r = post("/v1/completions", {{"model", "anything"},
                                          {"prompt", "Once upon a time"},
                                          {"max_tokens", 8},
                                          {"temperature", 0},
                                          {"logprobs", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  json lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  std::string joined;
  for (const json& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, j["choices"][0]["text"]);

  HttpResult s = post("/v1/completions", {{"prompt", "Once upon a time"},
                                          {"max_tokens", 8},
                                          {"temperature", 0},
                                          {"stream", true},
                                          {"stream_options", {{"include_usage", true}}}});
  std::vector<std::string> events = sse_data(s.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, j["choices"][0]["text"]);
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], 8);
}

TEST_F(Server, ChatCompletions) {
  json messages = json::array({{{"role", "system"}, {"content", "You tell stories."}},
                               {{"role", "user"}, {"content", "Tell me about a cat."}}});
  HttpResult r = post("/v1/chat/completions", {{"model", "x"},
                                               {"messages", messages},
                                               {"max_tokens", 10},
                                               {"temperature", 0},
                                               {"logprobs", true},
                                               {"top_logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  const std::string content = j["choices"][0]["message"]["content"];
  json content_lp = j["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content_lp.empty());
  EXPECT_EQ(content_lp[0]["top_logprobs"].size(), 3u);

  HttpResult s = post("/v1/chat/completions", {{"messages", messages},
                                               {"max_tokens", 10},
                                               {"temperature", 0},
                                               {"stream", true},
                                               {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(s.status, 200);
  std::vector<std::string> events = sse_data(s.body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json e = json::parse(events[i]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"].empty()) {
      EXPECT_EQ(e["usage"]["completion_tokens"], j["usage"]["completion_tokens"]);
      continue;
    }
    if (e["choices"][0]["delta"].contains("content")) text += e["choices"][0]["delta"]["content"];
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, content);
  EXPECT_EQ(finish, j["choices"][0]["finish_reason"]);
}

TEST_F(Server, TokenizeDetokenizeAndMetrics) {
  HttpResult t = post("/tokenize", {{"content", "Once upon a time"}, {"add_special", true}});
  ASSERT_EQ(t.status, 200);
  json tokens = json::parse(t.body)["tokens"];
  ASSERT_GT(tokens.size(), 1u);
  HttpResult d = post("/detokenize", {{"tokens", tokens}});
  ASSERT_EQ(d.status, 200);
  EXPECT_NE(json::parse(d.body)["content"].get<std::string>().find("Once upon a time"),
            std::string::npos);

  post("/generate", kGreedy);
  HttpResult m = get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.headers["content-type"].find("text/plain"), std::string::npos);
  for (const char* name : {"k25_requests_running", "k25_requests_waiting",
                           "k25_http_requests_total{", "k25_prompt_tokens_total",
                           "k25_completion_tokens_total", "k25_time_to_first_token_seconds_bucket",
                           "k25_inter_token_latency_seconds_bucket", "k25_kv_cache_bytes_used"}) {
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  }
}

// Each row: a bad request, the status it must get, and the error must be JSON.
TEST_F(Server, BadInputTable) {
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 600; ++i) s += "Once upon a time ";
    return s;
  }();
  struct Row {
    const char* name;
    std::string method, target, body;
    std::map<std::string, std::string> headers;
    int status;
  };
  const std::vector<Row> rows = {
      {"malformed JSON", "POST", "/generate", "{\"prompt\": \"x\"", {}, 400},
      {"wrong JSON type", "POST", "/generate", R"({"prompt": 42})", {}, 400},
      {"missing prompt", "POST", "/generate", R"({"max_tokens": 4})", {}, 400},
      {"negative max_tokens", "POST", "/generate", R"({"prompt": "a", "max_tokens": -4})", {}, 400},
      {"huge max_tokens",
       "POST",
       "/generate",
       R"({"prompt": "a", "max_tokens": 1000000000})",
       {},
       400},
      {"prompt longer than the context",
       "POST",
       "/generate",
       json({{"prompt", long_prompt}, {"max_tokens", 4}}).dump(),
       {},
       400},
      {"invalid UTF-8", "POST", "/generate", "{\"prompt\": \"\xc3\x28\xff\"}", {}, 400},
      {"x-latency-sla: platinum",
       "POST",
       "/generate",
       R"({"prompt": "a"})",
       {{"x-latency-sla", "platinum"}},
       400},
      {"x-prompt-length: -5",
       "POST",
       "/generate",
       R"({"prompt": "a"})",
       {{"x-prompt-length", "-5"}},
       400},
      {"x-response-length: abc",
       "POST",
       "/v1/completions",
       R"({"prompt": "a"})",
       {{"x-response-length", "abc"}},
       400},
      {"n = 17", "POST", "/v1/completions", R"({"prompt": "a", "n": 17})", {}, 400},
      {"oversized body",
       "POST",
       "/generate",
       "{\"prompt\": \"" + std::string(2 << 20, 'a') + "\"}",
       {},
       413},
      {"unknown route", "GET", "/nope", "", {}, 404},
      {"wrong method", "GET", "/generate", "", {}, 405},
      {"wrong method on GET route", "POST", "/health", "{}", {}, 405},
      {"unknown domain (OpenAI shape)",
       "POST",
       "/v1/completions",
       R"({"prompt": "a"})",
       {{"x-domain-hint", "legal"}},
       400},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    HttpResult r;
    try {
      r = http_call(port(), row.method, row.target, row.body, row.headers);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "request failed: " << e.what();
      continue;
    }
    EXPECT_EQ(r.status, row.status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"].is_object()) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") &&
                j["error"].contains("code"))
        << r.body;
    expect_still_serving();
  }
  HttpResult wrong_method = http_call(port(), "GET", "/generate");
  EXPECT_EQ(wrong_method.headers["allow"], "POST");
  HttpResult too_large = http_call(port(), "POST", "/generate", std::string(2 << 20, ' '));
  EXPECT_EQ(json::parse(too_large.body)["error"]["code"], "request_too_large");
  HttpResult bad_sla = post("/generate", {{"prompt", "a"}}, {{"x-latency-sla", "platinum"}});
  EXPECT_EQ(json::parse(bad_sla.body)["error"]["param"], "x-latency-sla");
}

TEST_F(Server, UnknownDomainOnGenerateUsesTheNotesShortForm) {
  HttpResult r = post("/generate", {{"prompt", "a"}}, {{"x-domain-hint", "legal"}});
  EXPECT_EQ(r.status, 400);
  json j = json::parse(r.body);
  EXPECT_EQ(j["error"], "gate not found");
  EXPECT_EQ(j["domain"], "legal");
  HttpResult ok = post("/generate", {{"prompt", "a"}, {"max_tokens", 2}},
                       {{"x-domain-hint", "default"},
                        {"x-prompt-length", "2456"},
                        {"x-response-length", "512"},
                        {"x-latency-sla", "bronze"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["flash"]["priority"], 10);
}

TEST(ServerProcessTest, ClientDisconnectCancelsTheRequest) {
  REQUIRE_MODEL();
  // 20 ms per step (a testing aid): the 500 tokens take 10 s, far longer than the server takes
  // to see the client gone (it looks every 100 ms), however fast or busy the machine is.
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--debug-step-delay-ms", "20"});
  ServerProcess server(args);
  const std::string cancelled = "k25_requests_finished_total{reason=\"cancelled\"}";
  {
    StreamingCall call(server.port(), "/generate",
                       json({{"prompt", "Once"},
                             {"max_tokens", 500},
                             {"ignore_eos", true},
                             {"stream", true},
                             {"temperature", 0}})
                           .dump());
    ASSERT_EQ(call.status(), 200);
    ASSERT_TRUE(call.read_until("data: "));
    call.close();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (metric(server.port(), cancelled) < 1) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the request was never cancelled";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(metric(server.port(), "k25_requests_finished_total{reason=\"length\"}"), 0);
  EXPECT_EQ(http_call(server.port(), "GET", "/health").status, 200);
}

TEST_F(Server, ManyConcurrentStreams) {
  const std::string expected =
      json::parse(post("/generate", {{"prompt", "The dog"}, {"max_tokens", 12}, {"temperature", 0}})
                      .body)["text"];
  constexpr int kStreams = 200;
  std::atomic<int> correct{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&] {
      try {
        HttpResult r =
            post("/generate",
                 {{"prompt", "The dog"}, {"max_tokens", 12}, {"temperature", 0}, {"stream", true}});
        std::vector<std::string> events = sse_data(r.body);
        if (r.status != 200 || events.empty() || events.back() != "[DONE]") return;
        std::string text;
        for (size_t k = 0; k + 1 < events.size(); ++k) text += json::parse(events[k])["text"];
        if (text == expected) ++correct;
      } catch (const std::exception&) {
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(correct.load(), kStreams);
}

TEST_F(Server, IdleKeepAliveConnectionsDoNotBlockNewRequests) {
  constexpr int kIdle = 1000;
  net::io_context ioc;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;
  for (int i = 0; i < kIdle; ++i) {
    auto s = std::make_unique<beast::tcp_stream>(ioc);
    s->connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port())));
    idle.push_back(std::move(s));
  }
  // Every tenth connection also had a request answered with keep-alive before going idle.
  for (int i = 0; i < kIdle; i += 10) {
    http::request<http::empty_body> req{http::verb::get, "/health", 11};
    req.set(http::field::host, "127.0.0.1");
    http::write(*idle[i], req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(*idle[i], buffer, res);
    ASSERT_EQ(res.result_int(), 200u);
    ASSERT_TRUE(res.keep_alive());
  }
  HttpResult r = post("/generate", kGreedy);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 24);
}

TEST_F(Server, CApiExampleRuns) {
  auto [rc, out] =
      run_command(std::string(K25_BIN_DIR) + "/capi_example " + model_path() + " 2>&1");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("text: , there was"), std::string::npos) << out;
  EXPECT_NE(out.find("k25_completion_tokens_total 24"), std::string::npos) << out;
}

TEST(ServerProcessTest, ApiKeyProtectsEverythingButHealth) {
  REQUIRE_MODEL();
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--api-key", "sk-test-123"});
  ServerProcess server(args);
  EXPECT_EQ(http_call(server.port(), "GET", "/health").status, 200);
  HttpResult none = http_call(server.port(), "GET", "/v1/models");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(
      http_call(server.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer nope"}}).status,
      401);
  EXPECT_EQ(
      http_call(server.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer sk-test-123"}})
          .status,
      200);
}

TEST(ServerProcessTest, SigtermDuringStreamingEndsStreamsCleanlyAndExitsZero) {
  REQUIRE_MODEL();
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--shutdown-timeout-s", "20"});
  ServerProcess server(args);
  std::vector<std::unique_ptr<StreamingCall>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(std::make_unique<StreamingCall>(
        server.port(), "/v1/completions",
        json({{"prompt", "Once"}, {"max_tokens", 300}, {"stream", true}, {"temperature", 0}})
            .dump()));
    ASSERT_EQ(calls.back()->status(), 200);
    ASSERT_TRUE(calls.back()->read_until("data: "));
  }
  server.signal(SIGTERM);
  for (auto& call : calls) {
    EXPECT_TRUE(call->read_to_end());
    std::vector<std::string> events = sse_data(call->body());
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), "[DONE]");
    json last = json::parse(events[events.size() - 2]);
    EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
  }
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
  EXPECT_NE(server.log().find("\"event\":\"stopped\""), std::string::npos);
}

TEST(ServerProcessTest, ShutdownTimeoutCancelsWhatIsLeft) {
  REQUIRE_MODEL();
  std::vector<std::string> args = base_args();
  args.insert(args.end(), {"--shutdown-timeout-s", "0"});
  ServerProcess server(args);
  StreamingCall call(server.port(), "/generate",
                     json({{"prompt", "Once"}, {"max_tokens", 400}, {"stream", true}}).dump());
  ASSERT_TRUE(call.read_until("data: "));
  server.signal(SIGINT);
  EXPECT_TRUE(call.read_to_end());
  std::vector<std::string> events = sse_data(call.body());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string reason = json::parse(events[events.size() - 2])["finish_reason"];
  EXPECT_TRUE(reason == "cancelled" || reason == "length" || reason == "stop") << reason;
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
}

TEST(ServerProcessTest, BadConfigStopsTheStartNamingTheKey) {
  auto [rc, out] =
      run_command(std::string(K25_BIN_DIR) + "/k25-server --model x.gguf --max-batch-size 0 2>&1");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("flash_scheduler.max_batch_size"), std::string::npos) << out;
  const std::string bad = ::testing::TempDir() + "/k25_bad_config.yaml";
  std::ofstream(bad) << "api_server:\n  portt: 1\n";
  auto [rc2, out2] =
      run_command(std::string(K25_BIN_DIR) + "/k25-server --config " + bad + " 2>&1");
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("api_server.portt"), std::string::npos) << out2;
  auto [rc3, out3] = run_command(std::string(K25_BIN_DIR) + "/k25-server --help");
  EXPECT_EQ(rc3, 0);
  EXPECT_NE(out3.find("--shutdown-timeout-s"), std::string::npos);
}

}  // namespace
}  // namespace k25::testing
