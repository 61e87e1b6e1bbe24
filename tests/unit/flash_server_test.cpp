// Flash on the request path of the HTTP API (R-FP, R-PR5): the response's flash object names the
// level and what was skipped, "pruning": "off" opts out, an unknown x-domain-hint is 400
// "gate not found", a SimHash match picks the domain, and /metrics counts pruned requests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "../integration/server_process.h"
#include "capi_engine.h"
#include "engine/engine.h"
#include "flash/domain_map.h"
#include "flash/gate.h"
#include "flash/simhash.h"
#include "in_process_server.h"
#include "model/model.h"
#include "server/api.h"
#include "server/http_server.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::http_call;
using testing::HttpResult;
using testing::InProcessServer;

const char* kLegalPrompt =
    "According to Article 47 of the Labour Contract Law, economic compensation shall be paid to "
    "the worker at the rate of one month's wage for each full year of service.";

// k25_metadata with "default" (gate keeps everything) and "legal" (masks head 1 of block 2,
// switches the FFN of block 3 off); legal's signature is kLegalPrompt's SimHash.
std::string make_metadata(const ModelConfig& m) {
  const fs::path dir = fs::temp_directory_path() / ("k25_flash_server_" + std::to_string(getpid()));
  fs::create_directories(dir);
  GateMlp keep = GateMlp::zero(kGateFeatures, m.n_layers, m.n_heads);
  for (float& b : keep.b2) b = 5.0f;
  save_gate_file(keep, (dir / "default_gate.bin").string());
  GateMlp legal = keep;
  legal.b2[m.n_layers + 3] = -5.0f;
  legal.head_off[2 * m.n_heads + 1] = 1;
  save_gate_file(legal, (dir / "legal_gate.bin").string());
  std::ofstream(dir / "domain_map.json")
      << domain_map_json({{"default", "default_gate.bin", 0.35, {}},
                          {"legal", "legal_gate.bin", 0.42, {simhash64(kLegalPrompt)}}});
  return dir.string();
}

class FlashApi : public ::testing::Test {
 protected:
  void SetUp() override {
    K25_REQUIRE_SHARED();
    model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
    metadata_ = make_metadata(model_->config());
  }
  void TearDown() override {
    if (!metadata_.empty()) fs::remove_all(metadata_);
  }
  ServerConfig config() const {
    ServerConfig c;
    c.log_requests = false;
    c.flash_metadata = metadata_;
    return c;
  }
  json generate(int port, const std::string& body, const std::string& domain = "",
                int* status = nullptr) {
    std::map<std::string, std::string> headers;
    if (!domain.empty()) headers["x-domain-hint"] = domain;
    HttpResult r = http_call(port, "POST", "/generate", body, headers);
    if (status) *status = r.status;
    return json::parse(r.body);
  }
  EngineOptions engine_options() const {
    EngineOptions o;
    o.n_threads = 1;
    return o;
  }

  std::unique_ptr<Model> model_;
  std::string metadata_;
};

TEST_F(FlashApi, ResponsesNameTheLevelAndWhatWasSkipped) {
  InProcessServer server(config());
  testing::CApiEngine engine(*model_, engine_options(), config());
  server.api().set_engine(engine.handle(), engine.tokenizer());
  const std::string body = R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0})";

  int status = 0;
  json r = generate(server.port(), body, "legal", &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["flash"]["domain"], "legal");
  EXPECT_EQ(r["flash"]["level"], 2);
  // Level 1 is on with calibrated metadata ("auto"): short request → FFN of the last block off.
  EXPECT_EQ(r["flash"]["skipped_blocks"],
            json::parse(R"([{"layer":3,"module":"ffn"},{"layer":4,"module":"ffn"}])"));
  EXPECT_EQ(r["flash"]["skipped_heads"], json::parse(R"([{"layer":2,"head":1}])"));
  EXPECT_GT(r["flash"]["compute_saved"].get<double>(), 0.0);

  r = generate(server.port(), body);  // default gate keeps everything: Level 1 only
  EXPECT_EQ(r["flash"]["level"], 1);
  EXPECT_EQ(r["flash"]["skipped_blocks"], json::parse(R"([{"layer":4,"module":"ffn"}])"));

  r = generate(server.port(), R"({"prompt":"Once","max_tokens":4,"pruning":"off"})", "legal");
  EXPECT_EQ(r["flash"]["level"], 0);
  EXPECT_TRUE(r["flash"]["skipped_blocks"].empty());
  EXPECT_EQ(r["flash"]["plan"], "full");

  // No hint: the SimHash of the prompt matches legal's signature.
  r = generate(server.port(), json({{"prompt", kLegalPrompt}, {"max_tokens", 2}}).dump());
  EXPECT_EQ(r["flash"]["domain"], "legal");

  const std::string metrics = http_call(server.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("flash_pruned_requests_total 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("flash_requests_by_level_total{level=\"0\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("flash_fingerprint_seconds_count 4"), std::string::npos);
  EXPECT_EQ(metrics.find("flash_skipped_block_evaluations_total 0\n"), std::string::npos);
}

TEST_F(FlashApi, UnknownDomainIsGateNotFoundAndBadPruningValueIs400) {
  InProcessServer server(config());
  testing::CApiEngine engine(*model_, engine_options(), config());
  server.api().set_engine(engine.handle(), engine.tokenizer());
  int status = 0;
  json r = generate(server.port(), R"({"prompt":"x","max_tokens":1})", "Legal", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"], "gate not found");
  r = generate(server.port(), R"({"prompt":"x","max_tokens":1,"pruning":"maybe"})", "", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "pruning");
}

TEST_F(FlashApi, PlainModelWithoutMetadataRunsLevel0UnlessRulesAreOn) {
  ServerConfig c = config();
  c.flash_metadata = "";
  c.model_path = testing::shared_path("models/stories260K.gguf");
  {
    InProcessServer server(c);
    testing::CApiEngine engine(*model_, engine_options(), c);
    server.api().set_engine(engine.handle(), engine.tokenizer());
    json r = generate(server.port(), R"({"prompt":"Once","max_tokens":2})");
    EXPECT_EQ(r["flash"]["level"], 0);
    int status = 0;
    generate(server.port(), R"({"prompt":"Once","max_tokens":2})", "legal", &status);
    EXPECT_EQ(status, 400);
  }
  c.rule_pruning = "on";
  InProcessServer server(c);
  testing::CApiEngine engine(*model_, engine_options(), c);
  server.api().set_engine(engine.handle(), engine.tokenizer());
  json r = generate(server.port(), R"({"prompt":"Once","max_tokens":2})");
  EXPECT_EQ(r["flash"]["level"], 1);
}

// Level 3 changes the plan during decode; the flash object then says how often it decided and
// what the last tokens ran under. Without adaptive pruning there is nothing to report.
TEST_F(FlashApi, Level3DecisionsAndTheFinalPlanAreReported) {
  ServerConfig c = config();
  c.flash_metadata = "";
  c.model_path = testing::shared_path("models/stories260K.gguf");
  c.rule_pruning = "on";
  const std::string body =
      R"({"prompt":"Once upon a time","max_tokens":100,"ignore_eos":true,"temperature":0})";
  {
    InProcessServer server(c);
    testing::CApiEngine engine(*model_, engine_options(), c);
    server.api().set_engine(engine.handle(), engine.tokenizer());
    json r = generate(server.port(), body);
    EXPECT_EQ(r["flash"]["level"], 1);
    ASSERT_TRUE(r["flash"].contains("adaptive")) << r.dump();
    // Decisions at 32, 64 and 96 generated tokens, once two intervals of positions exist.
    EXPECT_GE(r["flash"]["adaptive"]["decisions"].get<int>(), 2);
    EXPECT_LE(r["flash"]["adaptive"]["decisions"].get<int>(), 3);
    EXPECT_TRUE(r["flash"]["adaptive"]["final_plan"].is_string());
    EXPECT_GE(r["flash"]["adaptive"]["final_skipped_blocks"].get<int>(), 0);
  }
  c.adaptive_pruning = false;
  InProcessServer server(c);
  testing::CApiEngine engine(*model_, engine_options(), c);
  server.api().set_engine(engine.handle(), engine.tokenizer());
  json r = generate(server.port(), body);
  EXPECT_EQ(r["flash"]["level"], 1);
  EXPECT_FALSE(r["flash"].contains("adaptive")) << r.dump();
}

}  // namespace
}  // namespace k25
