// Sessions and prefix reuse through the HTTP API (R-KV4): session ids from "session_id",
// "user" and x-session-id, and the reused prompt tokens in usage (OpenAI's
// usage.prompt_tokens_details.cached_tokens; /generate's usage.cached_tokens) and /metrics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "../integration/server_process.h"
#include "capi_engine.h"
#include "engine/engine.h"
#include "fake_model.h"
#include "in_process_server.h"

namespace k25 {
namespace {

using nlohmann::json;
using testing::http_call;
using testing::HttpResult;
using testing::InProcessServer;

// 26 letters after <s>: one full page of 16 reusable positions (the last token is recomputed).
const std::string kLetters = "abcdefghijklmnopqrstuvwxyz";

ServerConfig quiet_config() {
  ServerConfig c;
  c.log_requests = false;
  return c;
}

EngineOptions engine_options() {
  EngineOptions o;
  o.n_threads = 1;
  o.kv_page_tokens = 16;
  return o;
}

json post(int port, const std::string& path, const json& body,
          const std::map<std::string, std::string>& headers = {}) {
  HttpResult r = http_call(port, "POST", path, body.dump(), headers);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body) : json();
}

// The usage object of a streamed response's last chunk that carries one.
json streamed_usage(const std::string& sse) {
  std::istringstream in(sse);
  json usage;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    json chunk = json::parse(line.substr(6));
    if (chunk.contains("usage") && !chunk["usage"].is_null()) usage = chunk["usage"];
  }
  return usage;
}

TEST(ServerSession, CompletionsReportCachedTokensForARepeatedPrefix) {
  testing::FakeModel model;
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options());
  server.api().set_engine(engine.handle(), engine.tokenizer());
  const json request = {
      {"prompt", kLetters}, {"max_tokens", 2}, {"temperature", 0}, {"user", "alice"}};
  json first = post(server.port(), "/v1/completions", request);
  EXPECT_EQ(first["usage"]["prompt_tokens"], 27);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json second = post(server.port(), "/v1/completions", request);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);

  // Streaming with include_usage, the session named by the header: the final usage has it too.
  json streamed = request;
  streamed.erase("user");
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  HttpResult sse = http_call(server.port(), "POST", "/v1/completions", streamed.dump(),
                             {{"x-session-id", "bob"}});
  ASSERT_EQ(sse.status, 200) << sse.body;
  json usage = streamed_usage(sse.body);
  ASSERT_TRUE(usage.is_object()) << sse.body;
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(engine.engine().stats().session_requests.load(), 3u);
}

TEST(ServerSession, GenerateReportsCachedTokensAndMetricsShowTheHitRate) {
  testing::FakeModel model;
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options());
  server.api().set_engine(engine.handle(), engine.tokenizer());
  const json request = {
      {"prompt", kLetters}, {"max_tokens", 2}, {"temperature", 0}, {"session_id", "s-1"}};
  EXPECT_EQ(post(server.port(), "/generate", request)["usage"]["cached_tokens"], 0);
  EXPECT_EQ(post(server.port(), "/generate", request)["usage"]["cached_tokens"], 16);
  HttpResult metrics = http_call(server.port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  // 16 of 54 prompt tokens came from the cache.
  EXPECT_NE(metrics.body.find("flash_l2_cache_hit_rate 0.296"), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("k25_session_requests_total 2"), std::string::npos);
  EXPECT_NE(metrics.body.find("flash_prefix_cache_pages{state=\"all\"}"), std::string::npos);
}

TEST(ServerSession, OverlongSessionIdsAreRejected) {
  testing::FakeModel model;
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options());
  server.api().set_engine(engine.handle(), engine.tokenizer());
  const json request = {{"prompt", "abc"}, {"max_tokens", 1}, {"user", std::string(300, 'x')}};
  HttpResult r = http_call(server.port(), "POST", "/v1/completions", request.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("session id"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace k25
