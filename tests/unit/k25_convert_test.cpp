// k25-convert (R-M3, R-PR4) on the real stories260K model, calibrated on the first part of
// ../shared/data/stories-sample.txt and evaluated on its held-out end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "flash/calibration.h"
#include "flash/convert.h"
#include "flash/flash_planner.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;
using testing::shared_path;

class K25Convert : public ::testing::Test {
 protected:
  void SetUp() override {
    K25_REQUIRE_SHARED();
    out_ = fs::temp_directory_path() / ("k25_convert_test_" + std::to_string(getpid()));
    fs::remove_all(out_);
    options_.model_path = shared_path("models/stories260K.gguf");
    options_.output_path = out_.string();
    options_.enable_gated_pruning = true;
    options_.calibration = {{"stories", shared_path("data/stories-sample.txt")}};
    options_.calib.max_chunks = 6;
    options_.calib.gen_tokens = 16;
    options_.calib.gate_epochs = 200;
    options_.calib.ratios = {0.1, 0.5};
  }
  void TearDown() override {
    if (!out_.empty()) fs::remove_all(out_);
  }
  fs::path out_;
  ConvertOptions options_;
};

TEST_F(K25Convert, WritesTheLayoutAndTheServerLoadsIt) {
  options_.pruning_ratio = 0.0;  // nothing switched off: always within the ROUGE-L bound
  std::ostringstream log;
  ASSERT_EQ(run_convert(options_, log), 0) << log.str();
  EXPECT_NE(log.str().find("| ratio | compute saved | PPL"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("unit 1/"), std::string::npos);  // progress
  ASSERT_TRUE(fs::exists(out_ / "model.gguf"));
  ASSERT_TRUE(fs::exists(out_ / "k25_metadata" / "domain_map.json"));
  ASSERT_TRUE(fs::exists(out_ / "k25_metadata" / "stories_gate.bin"));
  ASSERT_TRUE(fs::exists(out_ / "k25_metadata" / "default_gate.bin"));
  std::ifstream cfg(out_ / "config.json");
  const nlohmann::json config = nlohmann::json::parse(cfg);
  EXPECT_EQ(config["num_hidden_layers"], 5);
  EXPECT_EQ(config["k25_config"]["kv_cache_dtype"], "f16");
  const nlohmann::json table = config["k25_config"]["domains"]["stories"]["table"];
  ASSERT_EQ(table.size(), 3u);  // 0, 0.1, 0.5
  EXPECT_DOUBLE_EQ(table[0]["compute_saved"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(table[0]["rouge_l_change"].get<double>(), 0.0);
  EXPECT_LE(table[1]["compute_saved"].get<double>(), 0.1 + 1e-9);
  EXPECT_LE(table[2]["compute_saved"].get<double>(), 0.5 + 1e-9);
  EXPECT_GT(table[2]["compute_saved"].get<double>(), 0.1);
  // Gate parameters: tiny next to the model (the note: ~0.03% for a 14B model).
  EXPECT_LT(config["k25_config"]["domains"]["stories"]["gate_parameters"].get<int>(), 1000);

  auto model = Model::load(out_.string());  // the directory: model.gguf inside
  EXPECT_EQ(model->config().n_layers, 5);
  FlashPlanner planner(model->config(), out_.string(), FlashOptions{});
  ASSERT_TRUE(planner.has_metadata());
  EXPECT_TRUE(planner.knows_domain("stories"));
  EXPECT_TRUE(planner.knows_domain("default"));
  EXPECT_FALSE(planner.knows_domain("Stories"));  // case-sensitive
  // A paragraph of the calibration text is recognised by its SimHash.
  std::ifstream text_file(shared_path("data/stories-sample.txt"));
  std::stringstream text;
  text << text_file.rdbuf();
  const std::string para = text.str().substr(0, text.str().find("\n\n"));
  FingerprintInput in;
  in.prompt_text = para;
  in.prompt_tokens = 40;
  in.max_tokens = 50;
  const FlashResult r = planner.plan(in, false);
  EXPECT_EQ(r.fingerprint.domain, "stories");
  EXPECT_EQ(r.fingerprint.source, DomainSource::SimHash);

  // model.gguf is a file of its own, not a link to the input, and carries the gates itself.
  EXPECT_EQ(fs::hard_link_count(out_ / "model.gguf"), 1u);
  EXPECT_EQ(config["k25_config"]["outtype"], "copy");
  fs::remove_all(out_ / "k25_metadata");
  FlashPlanner from_gguf(model->config(), out_.string(), FlashOptions{});
  ASSERT_TRUE(from_gguf.has_metadata());
  EXPECT_TRUE(from_gguf.knows_domain("stories"));
  EXPECT_EQ(from_gguf.plan(in, false).fingerprint.domain, "stories");
}

TEST_F(K25Convert, QuantisesWithoutCalibrationAndRejectsAnUnknownOuttype) {
  options_.enable_gated_pruning = false;
  options_.calibration.clear();
  options_.outtype = "q8_0";
  std::ostringstream log, progress;
  options_.progress = &progress;
  ASSERT_EQ(run_convert(options_, log), 0) << log.str();
  EXPECT_NE(progress.str().find("wrote 48 tensors"), std::string::npos) << progress.str();
  auto model = Model::load(out_.string());
  EXPECT_EQ(model->config().n_layers, 5);
  std::ifstream cfg(out_ / "config.json");
  const nlohmann::json config = nlohmann::json::parse(cfg);
  EXPECT_EQ(config["k25_config"]["outtype"], "q8_0");
  EXPECT_EQ(config["num_hidden_layers"], 5);
  fs::remove_all(out_);
  options_.outtype = "q9_9";
  try {
    run_convert(options_, log);
    FAIL() << "unknown outtype accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown outtype 'q9_9'"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(out_));
  // The Q8_0 file cannot become Q4_0: one error, and no output directory left behind.
  const fs::path q8 = fs::temp_directory_path() / ("k25_convert_q8_" + std::to_string(getpid()));
  options_.outtype = "q8_0";
  options_.output_path = q8.string();
  ASSERT_EQ(run_convert(options_, log), 0);
  options_.model_path = (q8 / "model.gguf").string();
  options_.output_path = out_.string();
  options_.outtype = "q4_0";
  EXPECT_THROW(run_convert(options_, log), Error);
  EXPECT_FALSE(fs::exists(out_));
  fs::remove_all(q8);
}

TEST_F(K25Convert, RefusesARatioThatLosesQualityAndNamesOneThatPasses) {
  options_.pruning_ratio = 0.9;
  std::ostringstream log;
  EXPECT_EQ(run_convert(options_, log), 2) << log.str();
  EXPECT_NE(log.str().find("REFUSED: domain 'stories': pruning ratio 0.90"), std::string::npos)
      << log.str();
  EXPECT_TRUE(log.str().find(" passes\n") != std::string::npos ||
              log.str().find("no tested ratio above 0 passes") != std::string::npos);
  EXPECT_FALSE(fs::exists(out_));  // nothing written
}

TEST_F(K25Convert, BadArgumentsAreClearErrors) {
  options_.calibration = {{"stories", "/nonexistent/text.txt"}};
  std::ostringstream log;
  EXPECT_THROW(run_convert(options_, log), Error);
  EXPECT_THROW(parse_calibration_arg("noequals"), Error);
  EXPECT_THROW(parse_calibration_arg("bad domain=x"), Error);
  EXPECT_EQ(parse_calibration_arg("legal=a=b.txt").second, "a=b.txt");
  options_.pruning_ratio = 1.5;
  EXPECT_THROW(run_convert(options_, log), Error);
}

TEST(RougeL, LongestCommonSubsequenceF1) {
  EXPECT_DOUBLE_EQ(rouge_l({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(rouge_l({1, 2, 3}, {4, 5}), 0.0);
  EXPECT_NEAR(rouge_l({1, 9, 2, 3}, {1, 2, 3, 4}), 0.75, 1e-12);  // LCS 3, P = R = 3/4
  EXPECT_DOUBLE_EQ(rouge_l({}, {}), 1.0);
}

}  // namespace
}  // namespace k25
