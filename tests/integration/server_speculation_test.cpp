// Speculative decoding on the real k25-server (issue 16): "speculative": "ngram" gives the text
// that "off" gives, alone and with 6 requests at once, on /generate and the OpenAI endpoints;
// the flash object (also in the last streamed chunk) and /metrics count drafted and accepted
// tokens; bad values are a 400.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

std::vector<std::string> server_args(const std::string& default_mode) {
  return {"--config",
          std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
          "--model",
          model_path(),
          "--threads",
          "1",
          "--speculative",
          default_mode,
          "--speculative-max-batch",
          "8"};
}

const std::vector<std::string> kPrompts = {
    "Once upon a time",   "Lily and Ben",
    "The little dog",     "One day, a girl named Sue went to the beach.",
    "Tom had a toy car.", "The sun was hot"};

json generate_body(const std::string& prompt, const std::string& mode) {
  json body = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}, {"ignore_eos", true}};
  if (!mode.empty()) body["speculative"] = mode;
  return body;
}

json post_json(int port, const std::string& target, const json& body) {
  HttpResult r = http_call(port, "POST", target, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body);
}

TEST(ServerSpeculation, NgramTextEqualsOffAloneAndSixAtOnce) {
  ASSERT_TRUE(std::filesystem::exists(model_path())) << model_path() << " is absent";
  ServerProcess server(server_args("off"));
  const int port = server.port();
  std::vector<std::string> expected;
  int drafted = 0, accepted = 0;
  for (const std::string& p : kPrompts) {
    const json off = post_json(port, "/generate", generate_body(p, ""));  // the default: off
    EXPECT_EQ(off["flash"]["drafted_tokens"], 0);
    expected.push_back(off["text"]);
    const json ngram = post_json(port, "/generate", generate_body(p, "ngram"));
    EXPECT_EQ(ngram["text"], expected.back()) << p;
    drafted += ngram["flash"]["drafted_tokens"].get<int>();
    accepted += ngram["flash"]["accepted_tokens"].get<int>();
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(metric(port, "flash_spec_drafted_tokens_total"), drafted);
  EXPECT_EQ(metric(port, "flash_spec_accepted_tokens_total"), accepted);

  std::vector<json> together(kPrompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    threads.emplace_back(
        [&, i] { together[i] = post_json(port, "/generate", generate_body(kPrompts[i], "auto")); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(together[i]["text"], expected[i]) << kPrompts[i] << " (6 at once)";
  }

  // The OpenAI completions endpoint, streamed: the same text, the counts in the last chunk.
  json body = generate_body(kPrompts[0], "ngram");
  body["stream"] = true;
  HttpResult s = http_call(port, "POST", "/v1/completions", body.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  const std::vector<std::string> events = sse_data(s.body);
  ASSERT_GE(events.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, expected[0]);
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_GT(last["flash"]["drafted_tokens"].get<int>(), 0) << last.dump();
  EXPECT_GE(last["flash"]["drafted_tokens"].get<int>(),
            last["flash"]["accepted_tokens"].get<int>());
}

TEST(ServerSpeculation, TheConfiguredDefaultAppliesAndBadModesAreRefused) {
  ASSERT_TRUE(std::filesystem::exists(model_path())) << model_path() << " is absent";
  ServerProcess server(server_args("ngram"));
  const int port = server.port();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 48},
                     {"temperature", 0}};
  const json by_default = post_json(port, "/v1/chat/completions", chat);
  EXPECT_GT(by_default["flash"]["drafted_tokens"].get<int>(), 0) << by_default.dump();
  json chat_off = chat;
  chat_off["speculative"] = "off";
  const json off = post_json(port, "/v1/chat/completions", chat_off);
  EXPECT_EQ(off["flash"]["drafted_tokens"], 0);
  EXPECT_EQ(off["choices"][0]["message"]["content"],
            by_default["choices"][0]["message"]["content"]);

  for (const auto& [mode, message] :
       {std::pair<json, std::string>{"fast", "got 'fast'"}, {3, "speculative"}}) {
    json bad = generate_body("Once", "");
    bad["speculative"] = mode;
    HttpResult r = http_call(port, "POST", "/generate", bad.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find(message), std::string::npos) << r.body;
  }
}

}  // namespace
}  // namespace k25::testing
