// Operations on 127.0.0.1 with the stories260K model: warm-up before readiness (R-CFG2), the
// fallback circuit breaker against a second k25 instance (R-CFG3), k25-verify between two
// servers (R-OPS1), and two replicas behind HAProxy with one killed mid-run (R-SCALE).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "haproxy_process.h"
#include "server_process.h"
#include "system_tools.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string shared_model(const std::string& name) {
  return std::string(K25_SHARED_DIR) + "/models/" + name;
}

#define REQUIRE_MODELS(...)                                                                   \
  do {                                                                                        \
    for (const std::string& m : {__VA_ARGS__}) {                                              \
      if (!std::filesystem::exists(shared_model(m))) {                                        \
        GTEST_SKIP() << "SKIPPED: " << shared_model(m)                                        \
                     << " is absent; put ../shared beside the checkout to run the ops tests"; \
      }                                                                                       \
    }                                                                                         \
  } while (0)

std::vector<std::string> server_args(const std::string& model = "stories260K.gguf") {
  return {"--config",  std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
          "--model",   shared_model(model),
          "--threads", "1"};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

json health_of(int port) {
  return json::parse(http_call(port, "GET", "/health").body);
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "k25_ops_" + std::to_string(getpid()) + "_" + name;
}

const json kShort = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};

// ---------------------------------------------------------------------------------------------
// Warm-up (R-CFG2)

TEST(OpsWarmup, RunsThroughTheEngineBeforeHealthTurnsReady) {
  REQUIRE_MODELS("stories260K.gguf");
  // Two prompts inline in the config file, one from a JSONL file. The slow engine (a testing
  // aid) stretches the warm-up so that /health is seen answering 503 "warming up".
  const std::string yaml = temp_path("warmup.yaml"), jsonl = temp_path("warmup.jsonl");
  {
    std::ofstream(yaml) << "model:\n  path: " << shared_model("stories260K.gguf")
                        << "\nengine:\n  threads: 1\n  debug_step_delay_ms: 100\n"
                        << "warmup:\n  max_tokens: 8\n  prompts:\n"
                        << "    - {domain: default, prompt: \"Once upon a time\"}\n"
                        << "    - {prompt: \"The little dog\"}\n";
    std::ofstream(jsonl) << "{\"domain\": \"default\", \"prompt\": \"Lily and Tom\"}\n";
  }
  ServerProcess server({"--config", yaml, "--warmup-file", jsonl}, /*wait_ready=*/false);
  std::vector<std::string> states;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    HttpResult h = http_call(server.port(), "GET", "/health");
    const std::string state = json::parse(h.body)["status"];
    if (states.empty() || states.back() != state) states.push_back(state);
    if (h.status == 200) break;
    EXPECT_EQ(h.status, 503) << state;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << server.log();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // "loading" may be over before the first look; "warming up" lasts several slow steps.
  ASSERT_GE(states.size(), 2u);
  EXPECT_EQ(states[states.size() - 2], "warming up");
  EXPECT_EQ(states.back(), "ok");
  // "ready" is logged just after /health turns 200.
  std::string log = server.log();
  while (log.find("\"event\":\"ready\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = server.log();
  }
  const size_t start = log.find("\"warmup_start\""), done = log.find("\"warmup_done\""),
               ready = log.find("\"event\":\"ready\"");
  ASSERT_NE(start, std::string::npos) << log;
  ASSERT_NE(done, std::string::npos) << log;
  ASSERT_NE(ready, std::string::npos) << log;
  EXPECT_LT(start, done);
  EXPECT_LT(done, ready);
  EXPECT_NE(log.find("\"warmup_ms\":"), std::string::npos);
  // The warm-up went through the engine (its tokens are counted) and is exported.
  const std::string metrics = http_call(server.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_in(metrics, "k25_warmup_requests"), 3);
  EXPECT_GT(metric_in(metrics, "k25_warmup_duration_seconds"), 0);
  EXPECT_GE(metric_in(metrics, "k25_completion_tokens_total"), 3);
  EXPECT_EQ(metrics.find("endpoint=\"/v1/completions\""), std::string::npos)
      << "warm-up requests are not HTTP requests";
  std::remove(yaml.c_str());
  std::remove(jsonl.c_str());
}

TEST(OpsWarmup, BadWarmupEntryStopsTheStart) {
  REQUIRE_MODELS("stories260K.gguf");
  const std::string jsonl = temp_path("bad_warmup.jsonl");
  std::ofstream(jsonl) << "{\"domain\": \"astrology\", \"prompt\": \"x\"}\n";
  const std::string command = std::string(K25_BIN_DIR) + "/k25-server --model " +
                              shared_model("stories260K.gguf") + " --port 0 --warmup-file " +
                              jsonl + " 2>&1";
  auto [code, out] = run_command(command);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("warmup[0]: no gate for domain 'astrology'"), std::string::npos) << out;
  std::remove(jsonl.c_str());
}

// ---------------------------------------------------------------------------------------------
// Fallback circuit breaker (R-CFG3)

struct Answer {
  int status = 0;
  bool by_fallback = false;
  std::string text;
};

Answer complete(int port, const json& body) {
  HttpResult r = http_call(port, "POST", "/v1/completions", body.dump());
  Answer a;
  a.status = r.status;
  a.by_fallback = r.headers.count("x-k25-served-by") && r.headers["x-k25-served-by"] == "fallback";
  if (r.status == 200) {
    if (body.value("stream", false)) {
      for (const std::string& data : sse_data(r.body)) {
        if (data == "[DONE]") continue;
        a.text += json::parse(data)["choices"][0].value("text", "");
      }
    } else {
      a.text = json::parse(r.body)["choices"][0]["text"];
    }
  }
  return a;
}

TEST(OpsFallback, TimeoutsOpenTheCircuitFallbackAnswersAndAProbeClosesIt) {
  REQUIRE_MODELS("stories260K.gguf");
  ServerProcess upstream(server_args());
  // The primary's engine sleeps 20 ms per step (a testing aid) and runs one sequence at a
  // time, so a request queued behind a long generation gets no first token within the 500 ms
  // timeout, while an idle engine answers in ~20 ms.
  ServerProcess primary(
      plus(server_args(),
           {"--debug-step-delay-ms", "20", "--max-batch-size", "1", "--fallback-url",
            "http://127.0.0.1:" + std::to_string(upstream.port()) + "/v1", "--fallback-timeout-ms",
            "500", "--fallback-failure-threshold", "3", "--fallback-probe-interval-s", "1"}));
  const int port = primary.port();
  EXPECT_EQ(health_of(port)["fallback"]["state"], "closed");
  const std::string expected = complete(upstream.port(), kShort).text;
  ASSERT_FALSE(expected.empty());

  // A long generation holds the only slot (400 tokens x 20 ms: 8 s unless cancelled).
  json long_body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}, {"stream", true}};
  auto blocker = std::make_unique<StreamingCall>(port, "/v1/completions", long_body.dump());
  ASSERT_EQ(blocker->status(), 200);
  ASSERT_TRUE(blocker->read_until("\"text\""));

  // Three requests time out on the engine and are answered by the fallback; the third opens
  // the circuit.
  std::vector<Answer> answers;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(health_of(port)["fallback"]["state"], "closed") << i;
    answers.push_back(complete(port, kShort));
  }
  json health = health_of(port);
  EXPECT_EQ(health["fallback"]["state"], "open") << health.dump();
  EXPECT_EQ(metric(port, "flash_fallback_state"), 1);
  EXPECT_EQ(metric(port, "flash_fallback_timeouts_total"), 3);

  // While open, requests go straight upstream, streamed ones too (passed through as SSE).
  answers.push_back(complete(port, kShort));
  json streamed = kShort;
  streamed["stream"] = true;
  answers.push_back(complete(port, streamed));
  EXPECT_EQ(metric(port, "flash_fallback_timeouts_total"), 3);
  EXPECT_EQ(metric(port, "flash_fallback_requests_total"), 5);
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_EQ(answers[i].status, 200) << i;
    EXPECT_TRUE(answers[i].by_fallback) << i;
    EXPECT_EQ(answers[i].text, expected) << i;
  }

  // The engine recovers: the long generation goes away (its client leaves, so it is cancelled).
  blocker->close();
  blocker.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (metric(port, "k25_requests_running") + metric(port, "k25_requests_waiting") > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the engine never went idle";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Requests keep being answered upstream until the probe interval has passed; then one probe
  // goes to the engine, answers in time, and the circuit closes.
  Answer probe;
  for (;;) {
    probe = complete(port, kShort);
    ASSERT_EQ(probe.status, 200);
    EXPECT_EQ(probe.text, expected);
    if (!probe.by_fallback) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no probe reached the engine";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(health_of(port)["fallback"]["state"], "closed");
  EXPECT_EQ(metric(port, "flash_fallback_state"), 0);
  Answer after = complete(port, kShort);
  EXPECT_EQ(after.status, 200);
  EXPECT_FALSE(after.by_fallback);
  EXPECT_EQ(after.text, expected);
  // The request log says who served what.
  const std::string log = primary.log();
  EXPECT_NE(log.find("\"served_by\":\"fallback\""), std::string::npos);
  EXPECT_NE(log.find("\"timed_out\":true"), std::string::npos);
  EXPECT_NE(log.find("\"flash_level\":0"), std::string::npos);
}

TEST(OpsFallback, UnreachableUpstreamLeavesTheEngineToAnswer) {
  REQUIRE_MODELS("stories260K.gguf");
  // Every request times out (each step sleeps 300 ms, the timeout is 50 ms), the upstream
  // cannot be reached: the engine's late answers still go out, nothing is dropped.
  ServerProcess primary(
      plus(server_args(),
           {"--debug-step-delay-ms", "300", "--fallback-url",
            "http://127.0.0.1:" + std::to_string(free_loopback_port()), "--fallback-timeout-ms",
            "50", "--fallback-failure-threshold", "1", "--fallback-probe-interval-s", "3600"}));
  json body = kShort;
  body["max_tokens"] = 2;
  for (int i = 0; i < 2; ++i) {  // the first times out, the second finds the circuit open
    Answer a = complete(primary.port(), body);
    EXPECT_EQ(a.status, 200) << i;
    EXPECT_FALSE(a.by_fallback) << i;
    EXPECT_FALSE(a.text.empty()) << i;
  }
  EXPECT_EQ(health_of(primary.port())["fallback"]["state"], "open");
  EXPECT_EQ(metric(primary.port(), "flash_fallback_upstream_errors_total"), 2);
  EXPECT_EQ(metric(primary.port(), "flash_fallback_requests_total"), 0);
}

TEST(OpsFallback, SlowButProgressingLongPromptsKeepTheCircuitClosed) {
  REQUIRE_MODELS("stories260K.gguf");
  // Each step sleeps 100 ms and takes 8 prompt tokens: a long prompt's first token comes after
  // many steps, far past the 1 s timeout, but each step is progress. Request 2 is failed by
  // the engine in its first step (a testing aid): a real failure, which opens the circuit.
  ServerProcess primary(
      plus(server_args(),
           {"--debug-step-delay-ms", "100", "--micro-task-tokens", "8", "--step-token-budget", "8",
            "--fallback-url", "http://127.0.0.1:" + std::to_string(free_loopback_port()),
            "--fallback-timeout-ms", "1000", "--fallback-failure-threshold", "1",
            "--fallback-probe-interval-s", "3600", "--debug-fault",
            "runtime_error:request=2:tokens=0"}));
  const int port = primary.port();
  std::string story;
  for (int i = 0; i < 12; ++i) story += "Once upon a time, there was a little girl named Lily. ";
  const json long_prompt = {{"prompt", story}, {"max_tokens", 2}, {"temperature", 0}};
  HttpResult r = http_call(port, "POST", "/v1/completions", long_prompt.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const int prompt_tokens = json::parse(r.body)["usage"]["prompt_tokens"];
  EXPECT_GE(prompt_tokens, 120) << "the prompt must take more than 10 steps of 8 tokens";
  EXPECT_EQ(r.headers.count("x-k25-served-by"), 0u);
  EXPECT_EQ(health_of(port)["fallback"]["state"], "closed");
  EXPECT_EQ(metric(port, "flash_fallback_timeouts_total"), 0);
  // An engine error is a failure: the circuit opens (the upstream is unreachable, so the
  // engine's 500 goes out).
  HttpResult failed = http_call(port, "POST", "/v1/completions", kShort.dump());
  EXPECT_EQ(failed.status, 500) << failed.body;
  EXPECT_EQ(health_of(port)["fallback"]["state"], "open");
  EXPECT_EQ(metric(port, "flash_fallback_timeouts_total"), 0);
}

TEST(OpsLogs, TextFormatOneLinePerRequest) {
  REQUIRE_MODELS("stories260K.gguf");
  ServerProcess server(plus(server_args(), {"--log-format", "text"}));
  ASSERT_EQ(complete(server.port(), kShort).status, 200);
  // The line is written once the answer has gone out.
  std::string log = server.log();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log.find(" request POST ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    log = server.log();
  }
  EXPECT_NE(log.find(" request POST /v1/completions 200 "), std::string::npos) << log;
  EXPECT_NE(log.find(" id=cmpl-1 "), std::string::npos) << log;
  EXPECT_NE(log.find(" sla=silver domain=default flash_level=0 "), std::string::npos) << log;
  EXPECT_NE(log.find(" completion_tokens=8 "), std::string::npos) << log;
  EXPECT_NE(log.find(" served_by=engine"), std::string::npos) << log;
}

// ---------------------------------------------------------------------------------------------
// k25-verify (R-OPS1)

std::pair<int, std::string> verify(int port_a, int port_b, const std::string& report,
                                   const std::string& extra = "") {
  return run_command(std::string(K25_BIN_DIR) + "/k25-verify --a http://127.0.0.1:" +
                     std::to_string(port_a) + " --b http://127.0.0.1:" + std::to_string(port_b) +
                     "/v1 --max-tokens 16 --report " + report + " " + extra + " 2>&1");
}

TEST(OpsVerify, SameModelMatchesOtherWeightsDifferUnreachableIsAnError) {
  REQUIRE_MODELS("stories260K.gguf", "stories260K-q4_0.gguf");
  ServerProcess a(server_args()), b(server_args()), q4(server_args("stories260K-q4_0.gguf"));
  const std::string report = temp_path("verify.json");

  auto [same_code, same_out] = verify(a.port(), b.port(), report);
  EXPECT_EQ(same_code, 0) << same_out;
  EXPECT_NE(same_out.find("8 requests, 8 same, 0 differ, 0 errors"), std::string::npos) << same_out;
  json same = json::parse(read_file(report));
  EXPECT_EQ(same["differing"], 0);
  EXPECT_TRUE(same["differences"].empty());

  // A request file; Q4_0 weights against F32 change the distributions.
  const std::string requests = temp_path("requests.jsonl");
  std::ofstream(requests) << "{\"id\": \"r1\", \"prompt\": \"Once upon a time\", "
                             "\"max_tokens\": 32}\n{\"prompt\": \"The little dog\"}\n";
  auto [diff_code, diff_out] = verify(a.port(), q4.port(), report, "--requests " + requests);
  EXPECT_EQ(diff_code, 1) << diff_out;
  json diff = json::parse(read_file(report));
  EXPECT_EQ(diff["requests"], 2);
  ASSERT_GE(diff["differing"].get<int>(), 1) << diff.dump(2);
  const json& d = diff["differences"][0];
  EXPECT_FALSE(d["reasons"].empty());
  EXPECT_TRUE(d.contains("max_kl"));
  if (d["id"] == "r1") {
    EXPECT_LE(d["tokens_a"].size(), 32u);
  }

  auto [err_code, err_out] = verify(a.port(), free_loopback_port(), report);
  EXPECT_EQ(err_code, 2) << err_out;
  EXPECT_NE(err_out.find("error"), std::string::npos) << err_out;
  std::remove(report.c_str());
  std::remove(requests.c_str());
}

TEST(OpsVerify, AnInstanceThatPrunesAggressivelyDiffers) {
  REQUIRE_MODELS("stories260K.gguf");
  // Level 1 rules on a plain GGUF: half of the FFN blocks of every short request are skipped.
  ServerProcess full(server_args()),
      pruned(plus(server_args(), {"--rule-pruning", "on", "--rule-ffn-skip-fraction", "0.5"}));
  const std::string report = temp_path("verify-pruned.json");
  auto [code, out] = verify(full.port(), pruned.port(), report);
  EXPECT_EQ(code, 1) << out;
  json diff = json::parse(read_file(report));
  EXPECT_GE(diff["differing"].get<int>(), 1) << diff.dump(2);
  std::remove(report.c_str());
}

// ---------------------------------------------------------------------------------------------
// Behind HAProxy (R-SCALE)

TEST(OpsHaproxy, ReplicaKilledMidRunEveryRequestAnsweredOnce) {
  REQUIRE_MODELS("stories260K.gguf");
  // Each step sleeps 10 ms so that requests are in flight on the replica when it dies.
  std::vector<std::string> args = plus(server_args(), {"--debug-step-delay-ms", "10"});
  auto replica1 = std::make_unique<ServerProcess>(args);
  ServerProcess replica2(args);
  HaproxyProcess proxy("haproxy.cfg", replica1->port(), replica2.port());
  proxy.wait_ready();
  const int port = proxy.port();

  // The expected answer of every prompt, from the surviving replica directly.
  constexpr int kPrompts = 4, kClients = 4, kPerClient = 12;
  std::vector<std::string> prompts, expected;
  for (int i = 0; i < kPrompts; ++i) {
    prompts.push_back("Once upon a time " + std::to_string(i));
    json body = {{"prompt", prompts.back()}, {"max_tokens", 16}, {"temperature", 0}};
    expected.push_back(complete(replica2.port(), body).text);
  }

  std::mutex mutex;
  std::map<int, std::vector<Answer>> results;  // request number → answers received
  std::vector<std::string> failures;
  std::atomic<int> done{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int k = 0; k < kPerClient; ++k) {
        const int n = c * kPerClient + k;
        // Whole answers: a replica that dies before answering sent no byte, so HAProxy may
        // replay the request elsewhere. (A stream cut midway cannot be replayed; see
        // deploy/README.md.)
        json body = {{"prompt", prompts[n % kPrompts]}, {"max_tokens", 16}, {"temperature", 0}};
        Answer a;
        try {
          a = complete(port, body);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          failures.push_back("request " + std::to_string(n) + ": " + e.what());
          continue;
        }
        std::lock_guard lock(mutex);
        results[n].push_back(a);
        ++done;
      }
    });
  }
  // Kill replica 1 once the run is under way.
  while (done < kClients * kPerClient / 4)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  replica1->signal(SIGKILL);
  for (std::thread& t : clients) t.join();

  EXPECT_TRUE(failures.empty()) << failures.front() << "\n" << proxy.log();
  ASSERT_EQ(results.size(), static_cast<size_t>(kClients * kPerClient)) << proxy.log();
  for (const auto& [n, answers] : results) {
    ASSERT_EQ(answers.size(), 1u) << "request " << n;
    EXPECT_EQ(answers[0].status, 200) << "request " << n << "\n" << proxy.log();
    EXPECT_EQ(answers[0].text, expected[n % kPrompts]) << "request " << n;
  }
  // Replica 2 took over: the proxy still serves after the run.
  EXPECT_EQ(complete(port, kShort).status, 200);
  // How many requests HAProxy replayed on the other replica (its log's retries field "+N"):
  // informative only, since whether a request was in flight at the kill depends on timing.
  const std::string log = proxy.log();
  const std::regex redispatched(R"( [0-9]+/[0-9]+/[0-9]+/[0-9]+/\+[0-9]+ )");
  RecordProperty(
      "haproxy_redispatched_requests",
      static_cast<int>(std::distance(std::sregex_iterator(log.begin(), log.end(), redispatched),
                                     std::sregex_iterator())));
}

}  // namespace
}  // namespace k25::testing
