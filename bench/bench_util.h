// Helpers shared by the Google Benchmark programs: one thread pool per thread count, kept for the
// whole run, and a cheap deterministic random stream for filling inputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "core/thread_pool.h"

namespace k25::bench {

inline ThreadPool& pool_of(int n_threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[n_threads];
  if (!p) p = std::make_unique<ThreadPool>(n_threads);
  return *p;
}

// xorshift64: advances s and returns it.
inline uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

}  // namespace k25::bench
