// Sessions on the real k25-server (R-KV4): a chat's second turn reuses the first, and with the
// L3 tier on a stopped server leaves its cached prefixes on disk, so the next one answers the
// session's repeated prompt from them, with the same text.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

TEST(ServerSessions, TheL3TierKeepsASessionsPrefixAcrossARestart) {
  if (!std::filesystem::exists(model_path())) {
    GTEST_SKIP() << "SKIPPED: " << model_path() << " is absent; put ../shared beside the checkout";
  }
  char pattern[] = "/tmp/k25-server-l3-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const std::vector<std::string> args = {"--config",
                                         std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                         "--model",
                                         model_path(),
                                         "--threads",
                                         "1",
                                         "--l3-enabled",
                                         "true",
                                         "--l3-device",
                                         dir,
                                         "--l3-cache-size-gb",
                                         "0.01"};
  const json request = {{"prompt",
                         "Once upon a time, there was a little girl named Lily. She loved to play "
                         "outside in the park with her friends."},
                        {"max_tokens", 12},
                        {"temperature", 0},
                        {"user", "lily"}};
  json first;
  {
    ServerProcess server(args);
    HttpResult r = http_call(server.port(), "POST", "/v1/completions", request.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    first = json::parse(r.body);
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    server.signal(SIGTERM);
    ASSERT_EQ(server.wait_exit(), 0) << server.log();
  }
  ServerProcess server(args);
  HttpResult r = http_call(server.port(), "POST", "/v1/completions", request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json second = json::parse(r.body);
  const int prompt_tokens = first["usage"]["prompt_tokens"];
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"],
            (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);
  EXPECT_GT(metric(server.port(), "flash_l3_restores_total"), 0);
  std::filesystem::remove_all(dir);
}

TEST(ServerSessions, AChatsSecondTurnReusesTheFirst) {
  if (!std::filesystem::exists(model_path())) {
    GTEST_SKIP() << "SKIPPED: " << model_path() << " is absent; put ../shared beside the checkout";
  }
  ServerProcess server({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml", "--model",
                        model_path(), "--threads", "1"});
  json messages = json::array(
      {{{"role", "system"},
        {"content", "You tell short stories about a girl named Lily and her dog Max."}},
       {{"role", "user"}, {"content", "Tell me what Lily did in the park one sunny day."}}});
  auto turn = [&](const json& msgs) {
    const json body = {{"messages", msgs}, {"max_tokens", 12}, {"temperature", 0}};
    HttpResult r = http_call(server.port(), "POST", "/v1/chat/completions", body.dump(),
                             {{"x-session-id", "chat-1"}});
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  };
  const json first = turn(messages);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  messages.push_back(first["choices"][0]["message"]);
  messages.push_back({{"role", "user"}, {"content", "And what did Max do?"}});
  const json second = turn(messages);
  // The rendered conversation starts with the first turn's prompt: its whole pages are reused.
  const int first_prompt = first["usage"]["prompt_tokens"];
  EXPECT_GE(second["usage"]["prompt_tokens_details"]["cached_tokens"],
            (first_prompt - 1) / 16 * 16);
}

}  // namespace
}  // namespace k25::testing
