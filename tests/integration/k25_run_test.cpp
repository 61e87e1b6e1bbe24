// k25-run as a user runs it: real binaries, real files, exit codes and output.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_output.h"
#include "formats/gguf.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kShared = K25_SHARED_DIR;
const std::string kRun = std::string(K25_BIN_DIR) + "/k25-run";
const std::string kPlanBench = std::string(K25_BIN_DIR) + "/k25-planbench";

using Output = k25::testing::CommandOutput;

Output run(const std::string& args, const std::string& binary = kRun) {
  return k25::testing::run_capturing(binary + " " + args);
}

class K25Run : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kShared)) GTEST_SKIP() << "../shared is absent: k25-run tests SKIPPED";
    dir_ = fs::temp_directory_path() / ("k25_run_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string model(const std::string& name) { return kShared + "/models/" + name; }
  fs::path dir_;
};

TEST_F(K25Run, GreedyGenerateJsonMatchesReferenceText) {
  Output o = run("generate -m " + model("stories260K.gguf") +
                 " -p 'Once upon a time' -n 64 --temp 0 -t 1 --json");
  ASSERT_EQ(o.status, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_EQ(j["prompt_tokens"], json::parse("[1,403,407,261,378]"));
  EXPECT_EQ(j["tokens"].size(), 64u);
  EXPECT_EQ(j["text"].get<std::string>().substr(0, 48),
            ", there was a little girl named Lily. She loved ");
  EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
}

TEST_F(K25Run, SeededSamplingIsReproducible) {
  const std::string args =
      "generate -m " + model("stories260K-q8_0.gguf") +
      " -p 'Lily and Ben' -n 32 --temp 1.0 --top-k 40 --top-p 0.9 --seed 7 --json";
  Output a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(json::parse(a.out)["tokens"], json::parse(b.out)["tokens"]);
}

TEST_F(K25Run, PerplexityPrintsLlamaCppFinalLine) {
  Output o = run("perplexity -m " + model("stories260K.gguf") + " -f " + kShared +
                 "/data/stories-sample.txt -c 128 -t 2");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("Final estimate: PPL = 4.23"), std::string::npos) << o.out;
}

TEST_F(K25Run, TokenizeWorksOnVocabOnlyGguf) {
  Output o = run("tokenize -m " + kShared +
                 "/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf -p 'Hello world' --no-bos");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(json::parse(o.out), json::parse("[15043, 3186]"));
}

TEST_F(K25Run, LogitsDumpHasTopKPerPosition) {
  Output o = run("logits -m " + model("stories260K.gguf") + " -p 'Once upon' --top 3");
  ASSERT_EQ(o.status, 0) << o.err;
  json j = json::parse(o.out);
  ASSERT_EQ(j["logits"].size(), j["prompt_tokens"].size());
  for (const json& p : j["logits"]) {
    ASSERT_EQ(p["top"].size(), 3u);
    EXPECT_GE(p["top"][0][1].get<double>(), p["top"][1][1].get<double>());
  }
}

// Every bad input ends with one "error: ..." line on stderr and a non-zero exit.
void expect_clean_failure(const Output& o, const std::string& needle) {
  EXPECT_NE(o.status, 0);
  EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find(needle), std::string::npos) << o.err;
}

TEST_F(K25Run, SpeculativeGenerateRunsTheEngineAndGivesTheSameTokens) {
  const std::string args = "generate -m " + model("stories260K.gguf") +
                           " -p 'Once upon a time' -n 64 --temp 0 -t 1 --ignore-eos --json";
  Output direct = run(args), off = run(args + " --speculative off"),
         ngram = run(args + " --speculative ngram");
  ASSERT_EQ(ngram.status, 0) << ngram.err;
  const json d = json::parse(direct.out), o = json::parse(off.out), n = json::parse(ngram.out);
  EXPECT_EQ(n["tokens"], d["tokens"]);
  EXPECT_EQ(o["tokens"], d["tokens"]);
  EXPECT_EQ(o["drafted_tokens"], 0);
  EXPECT_EQ(o["decode_forward_calls"], 63);  // one token per decode step
  EXPECT_GT(n["drafted_tokens"].get<int>(), 0);
  EXPECT_GT(n["accepted_tokens"].get<int>(), 0);
  // Every accepted draft token saved a forward call.
  EXPECT_EQ(n["decode_forward_calls"].get<int>(), 63 - n["accepted_tokens"].get<int>());
  EXPECT_FALSE(d.contains("drafted_tokens"));
  // Self-speculation: the engine's draft plan drafts, the full model's tokens come out.
  const Output self = run(args + " --speculative self");
  ASSERT_EQ(self.status, 0) << self.err;
  const json s = json::parse(self.out);
  EXPECT_EQ(s["tokens"], d["tokens"]);
  EXPECT_GT(s["drafted_tokens"].get<int>(), 0);
  EXPECT_EQ(s["decode_forward_calls"].get<int>(), 63 - s["accepted_tokens"].get<int>());
  expect_clean_failure(run(args + " --speculative fast"), "--speculative");
}

TEST_F(K25Run, BadModelFilesFailWithOneClearLine) {
  std::ifstream in(model("stories260K.gguf"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  const fs::path truncated = dir_ / "truncated.gguf";
  std::ofstream(truncated, std::ios::binary).write(bytes.data(), bytes.size() / 2);
  expect_clean_failure(run("generate -m " + truncated.string() + " -p hi"), "truncated.gguf");

  const fs::path corrupt = dir_ / "corrupt.gguf";
  std::string bad = bytes;
  bad[0] = 'X';
  std::ofstream(corrupt, std::ios::binary).write(bad.data(), bad.size());
  expect_clean_failure(run("generate -m " + corrupt.string() + " -p hi"), "corrupt.gguf");

  k25::GgufWriter arch;
  arch.set_string("general.architecture", "gpt2");
  const fs::path wrong_arch = dir_ / "gpt2.gguf";
  arch.write(wrong_arch.string());
  expect_clean_failure(run("generate -m " + wrong_arch.string() + " -p hi"), "gpt2");

  expect_clean_failure(run("generate -m " + (dir_ / "missing.gguf").string() + " -p hi"),
                       "missing.gguf");
}

// k25-planbench: the full model and the Level 1 rule's plan, timed in one run, with the share of
// compute the plan skips.
TEST_F(K25Run, PlanBenchTimesTheFullModelAndTheRulePlan) {
  Output o =
      run("-m " + model("stories260K.gguf") + " --npp 16 --ntg 4 --reps 1 -t 1 --json", kPlanBench);
  ASSERT_EQ(o.status, 0) << o.err;
  const json rows = json::parse(o.out);
  ASSERT_EQ(rows.size(), 2u) << o.out;
  EXPECT_EQ(rows[0]["plan"], "full");
  EXPECT_EQ(rows[0]["compute_saved_prefill"], 0.0);
  EXPECT_EQ(rows[0]["prefill_speedup"], 1.0);
  EXPECT_EQ(rows[1]["plan"], "level1-rule");
  EXPECT_EQ(rows[1]["level"], 1);
  EXPECT_NE(rows[1]["skipped"].get<std::string>().find("ffn-off"), std::string::npos);
  EXPECT_GT(rows[1]["compute_saved_prefill"].get<double>(), 0.0);
  EXPECT_GT(rows[1]["ideal_decode_speedup"].get<double>(), 1.0);
  for (const json& row : rows) {
    EXPECT_GT(row["prefill_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(row["decode_tokens_per_s"].get<double>(), 0.0);
  }
}

TEST_F(K25Run, PlanBenchNamesAMissingMetadataDirectory) {
  Output o = run("-m " + model("stories260K.gguf") + " --metadata " + (dir_ / "nope").string() +
                     " --npp 16 --ntg 4 --reps 1 -t 1",
                 kPlanBench);
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("nope"), std::string::npos) << o.err;
}

}  // namespace
