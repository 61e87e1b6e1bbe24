// Reading an f32 KV cache's keys and values the way attention does, run by run (keys tile by
// tile, kernels/kv_dtype.h): for the cache tests that check every stored element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>

#include "model/kv_cache.h"

namespace k25::testing {

// Calls key(p, element) for every position p of [0, n) of (seq, layer), where element(i) is the
// key's element i, walking the cache's key runs from position 0.
template <typename Fn>
void for_each_key(KvCache& kv, int seq, int layer, int n, int kv_dim, Fn&& key) {
  for (int p = 0; p < n;) {
    const KeyRun run = kv.key_run(seq, layer, p);
    const float* tiles = reinterpret_cast<const float*>(run.tile);
    const int stop = std::min(n, p + std::max(run.n, 1));
    for (int j = run.lane; p < stop; ++j, ++p) {
      const float* tile = tiles + static_cast<size_t>(j / run.width) * kv_dim * run.width;
      const int lane = j % run.width;
      key(p, [&](int i) { return tile[static_cast<size_t>(i) * run.width + lane]; });
    }
  }
}

// Calls value(p, row) for every position p of [0, n) of (seq, layer), where row is the value's
// kv_dim floats, walking the cache's value runs from position 0.
template <typename Fn>
void for_each_value(KvCache& kv, int seq, int layer, int n, int kv_dim, Fn&& value) {
  for (int p = 0; p < n;) {
    int run = 0;
    const float* row = kv.values(seq, layer, p, &run);
    ASSERT_GE(run, 1) << "no value run at position " << p;
    for (const int stop = std::min(n, p + run); p < stop; ++p, row += kv_dim) value(p, row);
  }
}

}  // namespace k25::testing
