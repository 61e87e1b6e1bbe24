// Faults inside an engine step on the real k25-server with the stories260K model: an exception
// and an allocation failure thrown in a step (the engine.debug_fault testing aid) fail the
// request they belong to only (a 500, or an error event on a stream), the requests sharing its
// steps finish with the tokens of a lone run, no KV page leaks, and the server keeps serving.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

std::vector<std::string> server_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--config",  std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                   "--model",   model_path(),
                                   "--threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

json completion(const std::string& prompt, int max_tokens, bool stream) {
  return {{"prompt", prompt},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", stream}};
}

std::string streamed_text(const std::string& body) {
  std::string text;
  for (const std::string& data : sse_data(body)) {
    if (data == "[DONE]") continue;
    const json chunk = json::parse(data);
    if (chunk.contains("choices")) text += chunk["choices"][0].value("text", "");
  }
  return text;
}

// Waits (up to a minute) until the engine has no request; the stats come after the answers.
void wait_until_idle(int port) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (metric(port, "k25_requests_running") + metric(port, "k25_requests_waiting") != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the engine never went idle";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

struct FaultCase {
  const char* kind;  // the exception thrown
  bool stream;       // whether the failing request streams
};

class ServerEngineFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(ServerEngineFault, FailsThatRequestOnlyAndTheServerKeepsServing) {
  ASSERT_TRUE(std::filesystem::exists(model_path()))
      << model_path() << " is missing: put ../shared beside the checkout";
  const FaultCase fault = GetParam();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog",
                                            "Lily and Tom went"};
  // Long enough (20 ms per step) that the streams are still running when the victim fails.
  const int kStreamTokens = 150, kVictimTokens = 32;
  std::vector<std::string> lone;
  std::string lone_short;
  {
    ServerProcess reference(server_args());
    for (const std::string& p : prompts) {
      HttpResult r = http_call(reference.port(), "POST", "/v1/completions",
                               completion(p, kStreamTokens, false).dump());
      ASSERT_EQ(r.status, 200) << r.body;
      lone.push_back(json::parse(r.body)["choices"][0]["text"]);
    }
    HttpResult r = http_call(reference.port(), "POST", "/v1/completions",
                             completion(prompts[0], 16, false).dump());
    lone_short = json::parse(r.body)["choices"][0]["text"];
  }

  // Engine request ids count from 1 in submission order: the three streams are 1-3 (each is
  // started after the one before has its first token), the victim is 4.
  ServerProcess server(server_args({"--debug-step-delay-ms", "20", "--debug-fault",
                                    std::string(fault.kind) + ":request=4:tokens=3"}));
  const int port = server.port();
  std::vector<std::unique_ptr<StreamingCall>> streams;
  for (const std::string& p : prompts) {
    streams.push_back(std::make_unique<StreamingCall>(port, "/v1/completions",
                                                      completion(p, kStreamTokens, true).dump()));
    ASSERT_EQ(streams.back()->status(), 200);
    ASSERT_TRUE(streams.back()->read_until("\"text\""));
  }
  const std::string what =
      std::string(fault.kind) == "bad_alloc" ? "std::bad_alloc" : "injected fault";
  json error;
  if (fault.stream) {
    StreamingCall victim(port, "/v1/completions",
                         completion(prompts[1], kVictimTokens, true).dump());
    ASSERT_EQ(victim.status(), 200);  // the stream had started when its request failed
    ASSERT_TRUE(victim.read_to_end());
    const std::vector<std::string> events = sse_data(victim.body());
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(victim.body().find("[DONE]"), std::string::npos) << victim.body();
    error = json::parse(events.back());
  } else {
    HttpResult r = http_call(port, "POST", "/v1/completions",
                             completion(prompts[1], kVictimTokens, false).dump());
    ASSERT_EQ(r.status, 500) << r.body;
    error = json::parse(r.body);
  }
  const std::string message = error["error"].value("message", "");
  EXPECT_NE(message.find("internal error: " + what), std::string::npos) << error.dump();
  EXPECT_EQ(error["error"]["code"], "internal_error") << error.dump();
  // The victim failed while the streams ran beside it: none has finished yet.
  EXPECT_EQ(metric(port, "k25_requests_finished_total{reason=\"length\"}"), 0);

  for (size_t i = 0; i < streams.size(); ++i) {
    ASSERT_TRUE(streams[i]->read_to_end()) << i;
    EXPECT_EQ(streamed_text(streams[i]->body()), lone[i]) << "stream " << i;
    EXPECT_NE(streams[i]->body().find("[DONE]"), std::string::npos) << i;
  }
  // The server keeps serving, with the same tokens.
  HttpResult after =
      http_call(port, "POST", "/v1/completions", completion(prompts[0], 16, false).dump());
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(json::parse(after.body)["choices"][0]["text"], lone_short);
  EXPECT_EQ(http_call(port, "GET", "/health").status, 200);
  EXPECT_EQ(metric(port, "k25_requests_finished_total{reason=\"error\"}"), 1);
  EXPECT_EQ(metric(port, "k25_engine_step_failures_total"), 0);  // it was the request's
  // Idle: every page still in use is one the prefix cache holds (none leaked).
  wait_until_idle(port);
  EXPECT_EQ(metric(port, "k25_kv_pages_used"),
            metric(port, "flash_prefix_cache_pages{state=\"all\"}"));
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(), 0) << server.log();
}

INSTANTIATE_TEST_SUITE_P(Kinds, ServerEngineFault,
                         ::testing::Values(FaultCase{"runtime_error", false},
                                           FaultCase{"bad_alloc", true}),
                         [](const ::testing::TestParamInfo<FaultCase>& info) {
                           return std::string(info.param.kind) +
                                  (info.param.stream ? "_stream" : "_whole");
                         });

}  // namespace
}  // namespace k25::testing
