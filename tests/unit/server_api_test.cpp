// The HTTP API in-process over a fake model, for what the real server cannot show on demand:
// 503 while loading and draining, 429 with Retry-After when the queue is full, and a client
// that disconnects cancelling its request.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "../integration/server_process.h"
#include "capi_engine.h"
#include "engine/engine.h"
#include "fake_model.h"
#include "in_process_server.h"
#include "server/api.h"
#include "server/http_server.h"

namespace k25 {
namespace {

using nlohmann::json;
using testing::http_call;
using testing::HttpResult;
using testing::InProcessServer;

ServerConfig quiet_config() {
  ServerConfig c;
  c.log_requests = false;
  c.retry_after_s = 3;
  return c;
}

EngineOptions engine_options(int max_batch_size, int max_queue) {
  EngineOptions o;
  o.n_threads = 1;
  o.max_batch_size = max_batch_size;
  o.max_queue = max_queue;
  return o;
}

const std::string kRequest = R"({"prompt":"abc","max_tokens":3,"temperature":0})";

TEST(ServerApi, LoadingIs503ThenServes) {
  testing::FakeModel model;
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options(2, 2));
  HttpResult health = http_call(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(json::parse(health.body)["status"], "loading");
  HttpResult generate = http_call(server.port(), "POST", "/generate", kRequest);
  EXPECT_EQ(generate.status, 503);
  EXPECT_EQ(generate.headers["retry-after"], "3");
  EXPECT_EQ(json::parse(generate.body)["error"]["code"], "loading");

  server.api().set_engine(engine.handle(), engine.tokenizer());
  EXPECT_EQ(http_call(server.port(), "GET", "/health").status, 200);
  HttpResult ok = http_call(server.port(), "POST", "/generate", kRequest);
  ASSERT_EQ(ok.status, 200) << ok.body;
  // Fake model: after "c" come "d", "e", "f".
  EXPECT_EQ(json::parse(ok.body)["text"], "def");
}

TEST(ServerApi, FullQueueIs429WithRetryAfter) {
  testing::FakeModel model;
  model.hold();
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options(/*max_batch_size=*/1, /*max_queue=*/0));
  server.api().set_engine(engine.handle(), engine.tokenizer());
  std::thread first([&] {
    HttpResult r = http_call(server.port(), "POST", "/generate", kRequest);
    EXPECT_EQ(r.status, 200);
  });
  model.wait_for_forward_calls(1);  // the only slot is taken
  HttpResult rejected = http_call(server.port(), "POST", "/v1/completions", kRequest);
  EXPECT_EQ(rejected.status, 429);
  EXPECT_EQ(rejected.headers["retry-after"], "3");
  EXPECT_EQ(json::parse(rejected.body)["error"]["type"], "rate_limit_error");
  model.release();
  first.join();
}

TEST(ServerApi, DrainingIs503AndHealthSaysSo) {
  testing::FakeModel model;
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options(2, 2));
  server.api().set_engine(engine.handle(), engine.tokenizer());
  server.api().set_draining();
  HttpResult health = http_call(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(json::parse(health.body)["status"], "draining");
  HttpResult r = http_call(server.port(), "POST", "/v1/chat/completions",
                           R"({"messages":[{"role":"user","content":"a"}]})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "3");
  EXPECT_EQ(r.headers["connection"], "close");
}

// The fake model lets one step through at a time until the request is cancelled; without the
// cancel it would run into max_tokens and the test fails.
void expect_disconnect_cancels(bool streaming) {
  testing::FakeModel model(/*context_length=*/4096);
  model.hold();
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options(2, 2));
  server.api().set_engine(engine.handle(), engine.tokenizer());
  const int max_tokens = 4000;
  {
    net::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                          static_cast<unsigned short>(server.port())));
    http::request<http::string_body> req{http::verb::post, "/generate", 11};
    req.set(http::field::host, "127.0.0.1");
    req.body() = json({{"prompt", "a"}, {"max_tokens", max_tokens}, {"stream", streaming}}).dump();
    req.prepare_payload();
    http::write(stream, req);
    model.wait_for_forward_calls(1);
  }  // the client is gone
  const auto& cancelled =
      engine.engine().stats().requests_finished[static_cast<int>(FinishReason::Cancelled)];
  for (int step = 0; cancelled.load() == 0; ++step) {
    ASSERT_LT(step, max_tokens - 10) << "the request was never cancelled";
    model.grant(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  model.release();
  EXPECT_EQ(
      engine.engine().stats().requests_finished[static_cast<int>(FinishReason::Length)].load(), 0u);
}

TEST(ServerApi, DisconnectCancelsAWaitingRequest) {
  expect_disconnect_cancels(false);
}
TEST(ServerApi, DisconnectCancelsAStream) {
  expect_disconnect_cancels(true);
}

TEST(ServerApi, StreamedMultiByteTextArrivesWhole) {
  testing::FakeModel model;
  model.set_next(testing::letter('c'), testing::kByteC3);
  model.set_next(testing::kByteA9, testing::letter('z'));
  InProcessServer server(quiet_config());
  testing::CApiEngine engine(model, engine_options(2, 2));
  server.api().set_engine(engine.handle(), engine.tokenizer());
  HttpResult r = http_call(server.port(), "POST", "/generate",
                           R"({"prompt":"abc","max_tokens":3,"temperature":0,"stream":true})");
  ASSERT_EQ(r.status, 200);
  std::vector<std::string> events = testing::sse_data(r.body);
  ASSERT_EQ(events.size(), 4u) << r.body;  // "é", "z", summary, [DONE]
  EXPECT_EQ(json::parse(events[0])["text"], "\xC3\xA9");
  EXPECT_EQ(json::parse(events[1])["text"], "z");
}

}  // namespace
}  // namespace k25
