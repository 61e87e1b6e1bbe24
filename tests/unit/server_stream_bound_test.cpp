// The events waiting for a streaming client are bounded (api_server.stream_buffer_bytes): the
// channel's accounting, and, in-process over the fake model, a client that stops reading has its
// request cancelled once the bound is passed and, when it reads again, gets the slow_reader error.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "capi_engine.h"
#include "engine/engine.h"
#include "fake_model.h"
#include "in_process_server.h"
#include "server/event_channel.h"

namespace k25 {
namespace {

EngineEvent token_event(size_t text_bytes) {
  EngineEvent e;
  e.text = std::string(text_bytes, 'x');
  return e;
}

// Runs the channel's next() once on `ioc`; whether it gave an event.
bool next_gives_event(net::io_context& ioc, EventChannel& channel) {
  bool got = false;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        got = (co_await channel.next(std::chrono::milliseconds(20))).has_value();
      },
      net::detached);
  ioc.restart();
  ioc.run();
  return got;
}

TEST(EventChannel, OverflowDropsTheEventsAndRunsTheActionOnce) {
  net::io_context ioc;
  const EngineEvent e = token_event(100);
  auto channel =
      std::make_shared<EventChannel>(ioc.get_executor(), 3 * EventChannel::event_bytes(e));
  int actions = 0;
  channel->on_overflow([&] { ++actions; });
  for (int i = 0; i < 3; ++i) channel->push(0, e);
  EXPECT_FALSE(channel->overflowed());
  EXPECT_TRUE(next_gives_event(ioc, *channel));  // frees one place
  channel->push(0, e);
  EXPECT_FALSE(channel->overflowed());
  channel->push(0, e);  // a fourth waiting event
  EXPECT_TRUE(channel->overflowed());
  channel->push(0, e);
  ioc.restart();
  ioc.run();
  EXPECT_EQ(actions, 1);
  EXPECT_FALSE(next_gives_event(ioc, *channel));  // what waited is gone
}

TEST(EventChannel, OneEventAlwaysFitsAndALateActionStillRuns) {
  net::io_context ioc;
  auto channel = std::make_shared<EventChannel>(ioc.get_executor(), 1);
  channel->push(0, token_event(1000));
  EXPECT_FALSE(channel->overflowed());
  channel->push(0, token_event(1));
  EXPECT_TRUE(channel->overflowed());
  int actions = 0;
  channel->on_overflow([&] { ++actions; });
  ioc.restart();
  ioc.run();
  EXPECT_EQ(actions, 1);
}

TEST(EventChannel, CountsTheEventsPayloads) {
  EngineEvent e = token_event(10);
  const size_t plain = EventChannel::event_bytes(e);
  EXPECT_GE(plain, sizeof(EngineEvent) + 10);
  e.logprobs = TokenLogprobs{-1.0f, std::vector<std::pair<TokenId, float>>(20)};
  EXPECT_EQ(EventChannel::event_bytes(e), plain + 20 * sizeof(std::pair<TokenId, float>));
  e.embedding.resize(64);
  EXPECT_EQ(EventChannel::event_bytes(e),
            plain + 20 * sizeof(std::pair<TokenId, float>) + 64 * sizeof(float));
}

// A socket with a small receive window that sends one request and then reads nothing.
int silent_client(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int window = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof window);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  return fd;
}

std::string read_until_closed(int fd) {
  std::string out;
  char buffer[64 * 1024];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30'000) <= 0) break;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// Without the bound the request runs to max_tokens while its events pile up in the channel
// (the kernel's socket buffers in front of the client hold a few MB, so the answer is made
// larger than that: 60000 tokens with logprobs, some 25 MB of events).
TEST(ServerStreamBound, AClientThatStopsReadingIsCancelledAndToldWhy) {
  const int max_tokens = 60'000;
  testing::FakeModel model(/*context_length=*/max_tokens + 16);
  ServerConfig config;
  config.log_requests = false;
  config.stream_buffer_bytes = 64 << 10;
  testing::InProcessServer server(config);
  EngineOptions options;
  options.n_threads = 1;
  options.max_batch_size = 1;
  options.max_queue = 1;
  testing::CApiEngine engine(model, options, config);
  server.api().set_engine(engine.handle(), engine.tokenizer());

  const std::string body = nlohmann::json({{"prompt", "a"},
                                           {"max_tokens", max_tokens},
                                           {"stream", true},
                                           {"temperature", 0},
                                           {"ignore_eos", true},
                                           {"logprobs", 5}})
                               .dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  const int fd = silent_client(server.port(), request);
  const EngineStats& stats = engine.engine().stats();
  auto finished = [&](FinishReason r) {
    return stats.requests_finished[static_cast<int>(r)].load();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (finished(FinishReason::Cancelled) + finished(FinishReason::Length) == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the request never ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(finished(FinishReason::Cancelled), 1u);
  EXPECT_EQ(finished(FinishReason::Length), 0u);
  EXPECT_LT(stats.completion_tokens.load(), static_cast<uint64_t>(max_tokens));

  const std::string out = read_until_closed(fd);
  ::close(fd);
  EXPECT_NE(out.find("\"slow_reader\""), std::string::npos) << out.substr(out.size() - 500);
  EXPECT_EQ(out.find("[DONE]"), std::string::npos);  // OpenAI: nothing after the error
}

}  // namespace
}  // namespace k25
