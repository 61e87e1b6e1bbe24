#include "server/prompt_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

namespace k25 {
namespace {

constexpr size_t kSmall = PromptWorkers::kInlineBytes;
constexpr size_t kLarge = PromptWorkers::kInlineBytes + 1;

// Runs `body` as a coroutine on a one-thread event loop and returns when it has finished.
template <class Body>
void run_on_loop(Body body) {
  net::io_context loop;
  std::exception_ptr failure;
  net::co_spawn(loop, body(), [&](std::exception_ptr e) { failure = e; });
  loop.run();
  if (failure) std::rethrow_exception(failure);
}

TEST(PromptWorkersTest, SmallInputsRunInPlaceAndLargeOnesOnAWorker) {
  PromptWorkers workers(1);
  std::thread::id loop_thread, small_thread, large_thread;
  run_on_loop([&]() -> net::awaitable<void> {
    loop_thread = std::this_thread::get_id();
    small_thread = co_await workers.run(kSmall, [] { return std::this_thread::get_id(); });
    large_thread = co_await workers.run(kLarge, [] { return std::this_thread::get_id(); });
    // Back on the loop after the worker's part.
    EXPECT_EQ(std::this_thread::get_id(), loop_thread);
  });
  EXPECT_EQ(small_thread, loop_thread);
  EXPECT_NE(large_thread, loop_thread);
}

// Polls `loop` until `done` holds or five seconds have passed.
template <class Done>
bool poll_until(net::io_context& loop, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    loop.restart();
    loop.run_for(std::chrono::milliseconds(5));
  }
  return done();
}

// With the only worker busy on a long prompt, a short request is still prepared at once:
// before, it queued behind the long one (a failure seen under a loaded CI run).
TEST(PromptWorkersTest, ASmallInputDoesNotWaitForALongOneOnTheOnlyWorker) {
  PromptWorkers workers(1);
  net::io_context loop;
  std::promise<void> release_long;
  std::shared_future<void> long_may_finish = release_long.get_future().share();
  std::atomic<bool> long_started{false};
  bool long_done = false;
  int small_result = 0;
  net::co_spawn(
      loop,
      [&]() -> net::awaitable<void> {
        co_await workers.run(kLarge, [&] {
          long_started = true;
          long_may_finish.wait();
          return 0;
        });
        long_done = true;
      },
      net::detached);
  ASSERT_TRUE(poll_until(loop, [&] { return long_started.load(); }));

  net::co_spawn(
      loop,
      [&]() -> net::awaitable<void> {
        small_result = co_await workers.run(kSmall, [] { return 7; });
      },
      net::detached);
  EXPECT_TRUE(poll_until(loop, [&] { return small_result == 7; }))
      << "the short request waited for the long one";
  EXPECT_FALSE(long_done);

  release_long.set_value();
  EXPECT_TRUE(poll_until(loop, [&] { return long_done; }));
}

TEST(PromptWorkersTest, WhatTheWorkThrowsComesOutOfTheAwait) {
  PromptWorkers workers(1);
  for (size_t bytes : {kSmall, kLarge}) {
    bool caught = false;
    run_on_loop([&]() -> net::awaitable<void> {
      try {
        co_await workers.run(bytes, []() -> int { throw std::runtime_error("bad body"); });
      } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "bad body";
      }
    });
    EXPECT_TRUE(caught) << bytes << " bytes";
  }
}

}  // namespace
}  // namespace k25
