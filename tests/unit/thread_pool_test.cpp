// ThreadPool: every index runs exactly once per run(), sections do not overlap, size 1 runs
// inline, and an exception thrown by the job reaches the caller without breaking the pool.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace k25 {
namespace {

TEST(ThreadPoolTest, EveryIndexRunsExactlyOncePerRun) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> calls(n);
    constexpr int kRuns = 1000;
    for (int run = 0; run < kRuns; ++run) {
      pool.run([&](int i) {
        ASSERT_GE(i, 0);
        ASSERT_LT(i, n);
        calls[i].fetch_add(1);
      });
      // Every thread of this run has finished before run() returns.
      for (int i = 0; i < n; ++i) ASSERT_EQ(calls[i].load(), run + 1) << "thread " << i;
    }
  }
}

TEST(ThreadPoolTest, SingleThreadRunsInlineOnCaller) {
  ThreadPool pool(1);
  std::thread::id seen;
  pool.run([&](int i) {
    EXPECT_EQ(i, 0);
    seen = std::this_thread::get_id();
  });
  EXPECT_EQ(seen, std::this_thread::get_id());
}

TEST(ThreadPoolTest, NonPositiveSizeMeansOneThread) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.size(), 1);
  int calls = 0;
  pool.run([&](int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, WorkersWakeAfterSleeping) {
  ThreadPool pool(3);
  std::atomic<int> calls{0};
  pool.run([&](int) { calls.fetch_add(1); });
  // Long enough for the workers to stop spinning and block.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.run([&](int) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 6);
}

TEST(ThreadPoolTest, ResultsWrittenByWorkersAreVisibleAfterRun) {
  ThreadPool pool(4);
  std::vector<long> out(4 * 1000, 0);
  for (int run = 0; run < 200; ++run) {
    pool.run([&](int t) {
      for (int j = 0; j < 1000; ++j) out[t * 1000 + j] += j + t;
    });
  }
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < 1000; ++j) ASSERT_EQ(out[t * 1000 + j], 200L * (j + t));
}

TEST(ThreadPoolTest, ExceptionIsRethrownOnCallerAndPoolStaysUsable) {
  ThreadPool pool(3);
  for (int thrower : {0, 2}) {
    std::atomic<int> calls{0};
    EXPECT_THROW(pool.run([&](int i) {
      calls.fetch_add(1);
      if (i == thrower) throw std::runtime_error("boom");
    }),
                 std::runtime_error);
    EXPECT_EQ(calls.load(), 3) << "all threads still ran";
  }
  std::atomic<int> calls{0};
  pool.run([&](int) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 3);
}

TEST(ThreadPoolTest, DestroyWithoutRunning) {
  for (int i = 0; i < 20; ++i) ThreadPool pool(4);
}

}  // namespace
}  // namespace k25
