// The chunks of a parallel section split into one contiguous run per thread. A thread takes the
// chunks of its own run from the front, in order, so it reads its part of a matrix as one
// sequential stream (a decode matmul's software prefetch carries on from one chunk into the
// next); a thread whose run is empty takes chunks from the back of the others', so a thread that
// is slowed or descheduled is still helped, and the threads finish within about a chunk of each
// other. (Chunks handed out in turn from one counter made every chunk a new stream for its
// thread.) Every chunk is taken exactly once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/error.h"

namespace k25 {

class ChunkRuns {
 public:
  // Chunks [0, n_chunks) over n_runs runs; throws k25::Error beyond 2^31 - 1 chunks.
  ChunkRuns(int n_runs, int64_t n_chunks) : n_runs_(n_runs), runs_(new Run[n_runs]) {
    if (n_runs < 1 || n_chunks < 0 || n_chunks > INT32_MAX) {
      fail("ChunkRuns: ", n_chunks, " chunks over ", n_runs, " runs");
    }
    for (int i = 0; i < n_runs; ++i) {
      runs_[i].bounds.store(pack(n_chunks * i / n_runs, n_chunks * (i + 1) / n_runs),
                            std::memory_order_relaxed);
    }
  }

  int n_runs() const { return n_runs_; }

  // The next chunk at the front of run `run`, or -1 when it is empty.
  int64_t take_front(int run) { return take(run, false); }

  // The last chunk of run `run`, or -1 when it is empty.
  int64_t take_back(int run) { return take(run, true); }

 private:
  // Front and back in one word, so the owner and a thief never both take the last chunk.
  struct alignas(64) Run {
    std::atomic<uint64_t> bounds{0};
  };

  static uint64_t pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }

  int64_t take(int run, bool from_back) {
    std::atomic<uint64_t>& bounds = runs_[run].bounds;
    uint64_t now = bounds.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<uint32_t>(now >> 32);
      const auto back = static_cast<uint32_t>(now);
      if (front >= back) return -1;
      const uint64_t next = from_back ? pack(front, back - 1) : pack(front + 1, back);
      if (bounds.compare_exchange_weak(now, next, std::memory_order_relaxed)) {
        return from_back ? back - 1 : front;
      }
    }
  }

  int n_runs_;
  std::unique_ptr<Run[]> runs_;
};

}  // namespace k25
