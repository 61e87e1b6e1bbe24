// /v1/embeddings on the real k25-server (stories260K, the shipped k25_config.yaml: F16 KV cache):
// agreement with llama.cpp's vectors, and the official openai client's embeddings calls; and
// `k25-run embed`.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "../unit/embedding_reference.h"
#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

class EmbeddingServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model = std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
    if (!std::filesystem::exists(model)) return;  // SetUp fails the tests
    server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                 "--model", model, "--threads", "1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << K25_SHARED_DIR << " has no stories260K"; }
  int port() const { return server_->port(); }

  static ServerProcess* server_;
};
ServerProcess* EmbeddingServer::server_ = nullptr;

// Within the tolerance of tests/unit/engine_embedding_test.cpp (measured with an F16 cache on
// both sides: 9.8e-5, docs/server.md).
TEST_F(EmbeddingServer, AgreesWithLlamaCpp) {
  json input = json::array();
  for (const auto& ref : kStoriesMean) input.push_back(ref.text);
  HttpResult r = http_call(port(), "POST", "/v1/embeddings", json({{"input", input}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  ASSERT_EQ(body["data"].size(), kStoriesMean.size());
  for (size_t i = 0; i < kStoriesMean.size(); ++i) {
    const std::vector<float> got = body["data"][i]["embedding"].get<std::vector<float>>();
    const std::vector<float>& want = kStoriesMean[i].embedding;
    ASSERT_EQ(got.size(), want.size());
    double dot = 0;
    for (size_t j = 0; j < got.size(); ++j) {
      EXPECT_NEAR(got[j], want[j], 5e-4) << kStoriesMean[i].text << " [" << j << "]";
      dot += double(got[j]) * want[j];
    }
    EXPECT_GE(dot, 0.99999) << kStoriesMean[i].text;  // both have unit length
  }
}

TEST(K25RunEmbed, PrintsTheVectorsAsJson) {
  const std::string run = std::string(K25_BIN_DIR) + "/k25-run embed -m " +
                          std::string(K25_SHARED_DIR) + "/models/stories260K.gguf -t 1";
  auto [rc, out] = run_command(run + " --pooling last -p '" + kStoriesLast.text + "' -p 'Lily'");
  ASSERT_EQ(rc, 0) << out;
  json body = json::parse(out);
  EXPECT_EQ(body["pooling"], "last");
  ASSERT_EQ(body["data"].size(), 2u);
  EXPECT_EQ(body["data"][1]["index"], 1);
  const std::vector<float> got = body["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(got.size(), kStoriesLast.embedding.size());
  for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], kStoriesLast.embedding[j], 5e-4);

  auto [bad_rc, bad_out] = run_command(run + " --pooling max -p x 2>&1");
  EXPECT_NE(bad_rc, 0);
  EXPECT_NE(bad_out.find("error: --pooling: 'max' is not mean, cls or last"), std::string::npos)
      << bad_out;
}

}  // namespace
}  // namespace k25::testing
