// Real clients, unchanged, against the real k25-server on stories260K: the scripts of
// tests/integration/clients/ (an npm project pinned by its package-lock.json, installed by
// scripts/setup.sh). A missing node or package fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "node_clients.h"
#include "server_process.h"

namespace k25::testing {
namespace {

constexpr const char* kApiKey = "sk-clients";

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

class Clients : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(model_path())) return;
    server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                 "--model", model_path(), "--threads", "1", "--api-key", kApiKey});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_) << model_path() << " is missing: put ../shared beside the checkout";
  }
  // The script's arguments: the server's base URL and its API key.
  std::string server_args() const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + " " + kApiKey;
  }

  static ServerProcess* server_;
};
ServerProcess* Clients::server_ = nullptr;

// completions and chat, streamed and not, models, a 400.
TEST_F(Clients, OpenAiChatAndStreaming) {
  const std::string missing = missing_node_package("openai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("openai_chat.mjs", server_args());
}

// generateText and streamText through @ai-sdk/openai's chat completions provider.
TEST_F(Clients, VercelAiSdkText) {
  const std::string missing = missing_node_package("ai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("ai_sdk_text.mjs", server_args());
}

// embeddings.create: the client's default base64 transfer and encoding_format "float", one
// string and a batch, width = /v1/models meta.n_embd, norm 1, empty input (400).
TEST_F(Clients, OpenAiEmbeddings) {
  const std::string missing = missing_node_package("openai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("openai_embeddings.mjs", server_args());
}

// messages.create, messages.stream (every event type, text and finalMessage), countTokens,
// a missing max_tokens (400 in Anthropic's error shape).
TEST_F(Clients, AnthropicMessagesAndStreaming) {
  const std::string missing = missing_node_package("@anthropic-ai/sdk");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("anthropic_messages.mjs", server_args());
}

// generateText + Output.object with a zod schema (response_format json_schema, strict).
TEST_F(Clients, VercelAiSdkStructuredObject) {
  const std::string missing = missing_node_package("ai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("ai_sdk_object.mjs", server_args());
}

// tool_choice "required", a named function, streamed tool-call deltas, a tool result turn,
// a malformed tool (400).
TEST_F(Clients, OpenAiToolCalls) {
  const std::string missing = missing_node_package("openai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("openai_tools.mjs", server_args());
}

// chat.completions.parse with zodResponseFormat (json_schema, strict), json_object mode, a
// schema k25 cannot compile (400).
TEST_F(Clients, OpenAiStructuredOutputParse) {
  const std::string missing = missing_node_package("openai");
  ASSERT_TRUE(missing.empty()) << missing;
  EXPECT_CLIENT_PASSES("openai_parse.mjs", server_args());
}

}  // namespace
}  // namespace k25::testing
