// k25-bench against the real k25-server (stories260K on 127.0.0.1): a short workload and a
// sessions workload run to completion and their JSON reports add up; a dead server fails cleanly.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}
std::string text_path() {
  return std::string(K25_SHARED_DIR) + "/data/stories-sample.txt";
}

#define REQUIRE_MODEL()                                                                   \
  do {                                                                                    \
    if (!std::filesystem::exists(model_path())) {                                         \
      GTEST_SKIP() << "SKIPPED: " << model_path()                                         \
                   << " is absent; put ../shared beside the checkout to run bench tests"; \
    }                                                                                     \
  } while (0)

class K25Bench : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    if (!std::filesystem::exists(model_path())) return;
    server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                 "--model", model_path(), "--threads", "1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { REQUIRE_MODEL(); }
  void TearDown() override {
    for (const std::string& path : scratch_) remove_unless_failed(path);
  }

  // A path for a file of this test (/tmp, named by pid and `name`), deleted after it passes.
  std::string scratch(const std::string& name) {
    scratch_.push_back("/tmp/k25_bench_test_" + std::to_string(getpid()) + "_" + name);
    return scratch_.back();
  }

  // Runs k25-bench with the given flags plus --url and --json; returns (exit code, report).
  std::pair<int, json> bench(const std::string& flags, const std::string& name) {
    const std::string json_path = scratch(name + ".json"), stderr_path = scratch(name + ".stderr");
    const std::string command = std::string(K25_BIN_DIR) + "/k25-bench --url http://127.0.0.1:" +
                                std::to_string(server_->port()) + " --json " + json_path + " " +
                                flags + " 2>" + stderr_path;
    auto [code, stdout_text] = run_command(command);
    stdout_ = stdout_text;
    stderr_ = read_file(stderr_path);
    json report;
    if (std::filesystem::exists(json_path)) report = json::parse(read_file(json_path));
    return {code, report};
  }

  static ServerProcess* server_;
  std::string stdout_, stderr_;
  std::vector<std::string> scratch_;
};
ServerProcess* K25Bench::server_ = nullptr;

TEST_F(K25Bench, ShortWorkloadReportAddsUp) {
  const pid_t pid = server_->pid();
  const std::string svg = scratch("short.svg");
  auto [code, r] = bench(
      "--workload short --scale 0.5 --requests 8 --concurrency 4 "
      "--max-tokens 8 --sla-mix 20/30/50 --duration 120 --seed 3 "
      "--tokenizer-model " +
          model_path() + " --text " + text_path() + " --server-pid " + std::to_string(pid) +
          " --plot " + svg,
      "short");
  ASSERT_EQ(code, 0) << stdout_ << stderr_;
  EXPECT_NE(stdout_.find("overall"), std::string::npos);
  EXPECT_NE(stderr_.find("8/8 done"), std::string::npos) << stderr_;  // the last progress line
  EXPECT_EQ(r["planned"], 8);
  EXPECT_EQ(r["sent"], 8);
  EXPECT_EQ(r["not_started"], 0);
  EXPECT_TRUE(r["exact_prompt_tokens"].get<bool>());
  const json& overall = r["summary"]["overall"];
  EXPECT_EQ(overall["requests"], 8);
  EXPECT_EQ(overall["succeeded"], 8);
  EXPECT_EQ(overall["failed"], 0);
  EXPECT_EQ(overall["ttft_ms"]["count"], 8);
  EXPECT_GT(r["summary"]["req_per_s"].get<double>(), 0);
  EXPECT_GT(r["summary"]["output_tok_per_s"].get<double>(), 0);
  EXPECT_TRUE(r["summary"]["by_class"].contains("sla"));
  EXPECT_TRUE(r["summary"]["by_class"]["length"].contains("short"));
  ASSERT_EQ(r["requests"].size(), 8u);
  long tokens = 0;
  for (const json& req : r["requests"]) {
    EXPECT_TRUE(req["ok"].get<bool>()) << req.dump();
    EXPECT_EQ(req["http_status"], 200);
    ASSERT_TRUE(req["ttft_ms"].is_number()) << req.dump();
    EXPECT_GT(req["ttft_ms"].get<double>(), 0);
    EXPECT_LE(req["ttft_ms"].get<double>(), req["e2e_ms"].get<double>());
    EXPECT_TRUE(req["output_tokens_from_usage"].get<bool>());
    EXPECT_GE(req["output_tokens"].get<int>(), 1);
    EXPECT_LE(req["output_tokens"].get<int>(), 8);
    EXPECT_LE(req["itl_ms"].size() + 1, req["output_tokens"].get<size_t>());
    // The server's own count of the prompt matches the bench's (same tokenizer).
    EXPECT_EQ(req["prompt_tokens"], req["planned_prompt_tokens"]);
    tokens += req["output_tokens"].get<int>();
  }
  EXPECT_EQ(overall["output_tokens"], tokens);
  EXPECT_GT(r["server_memory"]["peak_rss_bytes"].get<long long>(), 0);
  const std::string plot = read_file(svg);
  EXPECT_EQ(plot.rfind("<?xml", 0), 0u);
  EXPECT_NE(plot.find("</svg>"), std::string::npos);
}

TEST_F(K25Bench, SessionsResendTheGrowingConversation) {
  auto [code, r] = bench(
      "--workload sessions --sessions 2 --turns 3 --history-tokens 60 "
      "--turn-tokens 12 --concurrency 2 --max-tokens 6 --no-progress "
      "--tokenizer-model " +
          model_path() + " --text " + text_path(),
      "sessions");
  ASSERT_EQ(code, 0) << stdout_ << stderr_;
  EXPECT_EQ(stderr_.find("progress:"), std::string::npos);
  EXPECT_EQ(r["sent"], 6);
  EXPECT_EQ(r["summary"]["overall"]["succeeded"], 6);
  EXPECT_EQ(r["summary"]["by_class"]["turn"]["first"]["requests"], 2);
  EXPECT_EQ(r["summary"]["by_class"]["turn"]["follow_up"]["requests"], 4);
  const json& req = r["requests"];
  ASSERT_EQ(req.size(), 6u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(req[s * 3]["tags"]["turn"], "first");
    EXPECT_EQ(req[s * 3]["prompt_tokens"], req[s * 3]["planned_prompt_tokens"]);
    for (int t = 1; t < 3; ++t) {
      EXPECT_EQ(req[s * 3 + t]["tags"]["turn"], "follow_up");
      // Each turn carries the previous prompt, its answer and a new user line.
      EXPECT_GT(req[s * 3 + t]["prompt_tokens"].get<int>(),
                req[s * 3 + t - 1]["prompt_tokens"].get<int>() +
                    req[s * 3 + t - 1]["output_tokens"].get<int>());
    }
  }
}

TEST_F(K25Bench, DeadServerFailsEveryRequest) {
  // A port nobody listens on: bind one, note it, close it.
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const int port = acceptor.local_endpoint().port();
  acceptor.close();
  const std::string out = scratch("dead.json");
  auto [code, stdout_text] = run_command(
      std::string(K25_BIN_DIR) + "/k25-bench --url http://127.0.0.1:" + std::to_string(port) +
      " --requests 3 --concurrency 2 --max-tokens 4 --no-progress --json " + out + " 2>&1");
  EXPECT_EQ(code, 1) << stdout_text;
  json r = json::parse(read_file(out));
  EXPECT_EQ(r["summary"]["overall"]["failed"], 3);
  EXPECT_EQ(r["summary"]["errors"].size(), 1u);
  EXPECT_NE(r["summary"]["errors"].begin().key().find("connect"), std::string::npos);
}

}  // namespace
}  // namespace k25::testing
