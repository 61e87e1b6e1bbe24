// POST /v1/embeddings in-process over stories260K: OpenAI's response shape, every input shape,
// base64 = the float array, input order, the 400s, and a batch larger than the engine's queue.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "../integration/server_process.h"
#include "capi_engine.h"
#include "core/error.h"
#include "embedding_reference.h"
#include "engine/embedding_batch.h"
#include "engine/engine.h"
#include "in_process_server.h"
#include "test_paths.h"

namespace k25 {
namespace {

using nlohmann::json;
using testing::http_call;
using testing::HttpResult;
using testing::InProcessServer;

ServerConfig quiet_config() {
  ServerConfig c;
  c.log_requests = false;
  return c;
}

std::string long_text() {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "Once upon a time ";
  return text;
}

class ServerEmbeddings : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::shared_available()) << K25_SHARED_DIR << " is missing";
    model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
  }
  // Declared before the engine (in_process_server.h says why).
  void start(EngineOptions options) {
    options.n_threads = 2;
    server_ = std::make_unique<InProcessServer>(quiet_config());
    engine_ = std::make_unique<testing::CApiEngine>(*model_, options);
    server_->api().set_engine(engine_->handle(), engine_->tokenizer());
  }
  void TearDown() override {
    engine_.reset();
    server_.reset();
  }
  HttpResult post(const json& body) {
    return http_call(server_->port(), "POST", "/v1/embeddings", body.dump());
  }
  std::vector<float> floats(const json& embedding) { return embedding.get<std::vector<float>>(); }

  std::unique_ptr<Model> model_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<testing::CApiEngine> engine_;
};

TEST_F(ServerEmbeddings, OpenAiShapeAndTheEngineVector) {
  start({});
  const auto& ref = testing::kStoriesMean[0];
  HttpResult r = post({{"input", ref.text}, {"model", "anything"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], model_->config().name);
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["object"], "embedding");
  EXPECT_EQ(body["data"][0]["index"], 0);
  const std::vector<TokenId> ids = model_->tokenizer().encode(ref.text, true, false);
  EXPECT_EQ(body["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(body["usage"]["total_tokens"], ids.size());
  const std::vector<float> got = floats(body["data"][0]["embedding"]);
  EXPECT_EQ(got, embed_all(engine_->engine(), {ids}, Pooling::Mean).at(0));
  ASSERT_EQ(got.size(), ref.embedding.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], ref.embedding[i], 5e-4) << i;  // as engine_embedding_test
}

TEST_F(ServerEmbeddings, BatchOrderTokenIdsAndBase64) {
  start({});
  std::vector<std::string> texts;
  for (const auto& ref : testing::kStoriesMean) texts.push_back(ref.text);
  HttpResult r = post({{"input", texts}});
  ASSERT_EQ(r.status, 200) << r.body;
  json batch = json::parse(r.body);
  ASSERT_EQ(batch["data"].size(), texts.size());
  std::vector<json> ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(batch["data"][i]["index"], i);
    HttpResult alone = post({{"input", texts[i]}});
    EXPECT_EQ(json::parse(alone.body)["data"][0]["embedding"], batch["data"][i]["embedding"]) << i;
    ids.push_back(model_->tokenizer().encode(texts[i], true, false));
  }
  // Token ids, one input and several: the same vectors as the texts.
  HttpResult one_ids = post({{"input", ids[1]}});
  ASSERT_EQ(one_ids.status, 200) << one_ids.body;
  EXPECT_EQ(json::parse(one_ids.body)["data"][0]["embedding"], batch["data"][1]["embedding"]);
  HttpResult nested = post({{"input", ids}});
  ASSERT_EQ(nested.status, 200) << nested.body;
  EXPECT_EQ(json::parse(nested.body)["data"], batch["data"]);

  // base64: little-endian float32 bytes of the same floats.
  HttpResult b64 = post({{"input", texts}, {"encoding_format", "base64"}});
  ASSERT_EQ(b64.status, 200) << b64.body;
  json encoded = json::parse(b64.body);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = encoded["data"][i]["embedding"].get<std::string>();
    std::vector<uint8_t> bytes;
    uint32_t acc = 0;
    int bits = 0;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (char c : text) {
      if (c == '=') break;
      acc = (acc << 6) | static_cast<uint32_t>(std::strchr(alphabet, c) - alphabet);
      bits += 6;
      if (bits >= 8) bytes.push_back(static_cast<uint8_t>(acc >> (bits -= 8)));
    }
    const std::vector<float> expected = floats(batch["data"][i]["embedding"]);
    ASSERT_EQ(bytes.size(), expected.size() * 4);
    for (size_t j = 0; j < expected.size(); ++j) {
      uint32_t word = 0;
      for (int b = 0; b < 4; ++b) word |= static_cast<uint32_t>(bytes[j * 4 + b]) << (8 * b);
      EXPECT_EQ(std::bit_cast<float>(word), expected[j]) << i << "," << j;
    }
  }
}

TEST_F(ServerEmbeddings, BadRequestsAre400) {
  EngineOptions o;
  o.context_size = 32;
  start(o);
  const int dim = model_->config().dim;
  struct Case {
    json body;
    std::string param, message;
  };
  const std::vector<Case> cases = {
      {{{"input", ""}}, "input", "empty string"},
      {{{"input", json::array()}}, "input", "empty array"},
      {{{"input", {1, 100000}}}, "input", "100000 is not a token id"},
      {{{"input", long_text()}}, "input", "the context holds 32"},
      {{{"input", "a"}, {"dimensions", 32}}, "dimensions", concat("have ", dim, " dimensions")},
      {{{"input", "a"}, {"encoding_format", "int8"}}, "encoding_format", "int8"},
  };
  for (const Case& c : cases) {
    HttpResult r = post(c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump();
    json error = json::parse(r.body)["error"];
    EXPECT_EQ(error["param"], c.param) << c.body.dump();
    EXPECT_NE(error["message"].get<std::string>().find(c.message), std::string::npos)
        << c.body.dump() << ": " << error["message"];
  }
  HttpResult same_dims = post({{"input", "a"}, {"dimensions", dim}});
  EXPECT_EQ(same_dims.status, 200) << same_dims.body;
  EXPECT_EQ(http_call(server_->port(), "GET", "/v1/embeddings").status, 405);
}

TEST_F(ServerEmbeddings, ABatchLargerThanTheQueueIsServedInWaves) {
  EngineOptions o;
  o.max_batch_size = 2;
  o.max_queue = 1;
  start(o);
  std::vector<std::string> texts;
  for (int i = 0; i < 9; ++i) texts.push_back(concat("Tom had ", i, " toy cars."));
  HttpResult r = post({{"input", texts}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = json::parse(r.body);
  ASSERT_EQ(body["data"].size(), texts.size());
  HttpResult fifth = post({{"input", texts[5]}});
  EXPECT_EQ(json::parse(fifth.body)["data"][0]["embedding"], body["data"][5]["embedding"]);
}

}  // namespace
}  // namespace k25
