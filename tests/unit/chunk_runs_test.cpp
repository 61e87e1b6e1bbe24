#include "core/chunk_runs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/error.h"

namespace k25 {
namespace {

TEST(ChunkRunsTest, RunsAreContiguousAndTakenInOrderFromTheFront) {
  ChunkRuns runs(3, 10);  // runs [0, 3), [3, 6), [6, 10)
  std::vector<int64_t> first;
  for (int64_t c; (c = runs.take_front(2)) >= 0;) first.push_back(c);
  EXPECT_EQ(first, (std::vector<int64_t>{6, 7, 8, 9}));
  EXPECT_EQ(runs.take_front(0), 0);
  EXPECT_EQ(runs.take_front(1), 3);
}

TEST(ChunkRunsTest, ThievesTakeFromTheBackUntilTheOwnerMeetsThem) {
  ChunkRuns runs(2, 8);  // [0, 4), [4, 8)
  EXPECT_EQ(runs.take_back(1), 7);
  EXPECT_EQ(runs.take_back(1), 6);
  EXPECT_EQ(runs.take_front(1), 4);
  EXPECT_EQ(runs.take_front(1), 5);
  EXPECT_EQ(runs.take_front(1), -1);
  EXPECT_EQ(runs.take_back(1), -1);
}

TEST(ChunkRunsTest, FewerChunksThanRunsLeavesSomeRunsEmpty) {
  ChunkRuns runs(4, 2);
  int taken = 0;
  for (int r = 0; r < 4; ++r) {
    while (runs.take_front(r) >= 0) ++taken;
  }
  EXPECT_EQ(taken, 2);
}

TEST(ChunkRunsTest, RejectsCountsItCannotHold) {
  EXPECT_THROW(ChunkRuns(0, 4), Error);
  EXPECT_THROW(ChunkRuns(2, -1), Error);
  EXPECT_THROW(ChunkRuns(2, int64_t{1} << 31), Error);
}

// Threads drain their own run, then steal from the others' backs, as parallel sections do; one
// run's owner never starts (a descheduled thread). Every chunk must be taken exactly once.
TEST(ChunkRunsTest, ConcurrentOwnersAndThievesTakeEveryChunkOnce) {
  constexpr int kThreads = 4;
  for (int64_t n_chunks : {1, 5, 64, 1001}) {
    for (int round = 0; round < 20; ++round) {
      ChunkRuns runs(kThreads + 1, n_chunks);  // run kThreads has no owner
      std::vector<std::atomic<int>> taken(n_chunks);
      std::atomic<int> ready{0};
      const auto work = [&](int self) {
        ++ready;
        while (ready.load() < kThreads) {
        }
        for (int64_t c; (c = runs.take_front(self)) >= 0;) ++taken[c];
        for (int k = 1; k <= kThreads; ++k) {
          const int victim = (self + k) % (kThreads + 1);
          for (int64_t c; (c = runs.take_back(victim)) >= 0;) ++taken[c];
        }
      };
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
      for (auto& t : threads) t.join();
      for (int64_t c = 0; c < n_chunks; ++c) {
        ASSERT_EQ(taken[c].load(), 1) << "chunk " << c << " of " << n_chunks;
      }
    }
  }
}

}  // namespace
}  // namespace k25
