// Element-wise work over the rows of a batch (norms, RoPE, activations, residual adds) split over
// the pool when there is enough of it: in a 2-thread prefill these serial loops were a few percent
// of the time, twice their 1-thread share. Each row is computed by the same code whatever range
// it falls in, so results do not depend on the split.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.h"

namespace k25 {

// Below this many elements, waking the workers costs more than the work.
inline constexpr int64_t kMinParallelElements = int64_t{1} << 16;

// Calls fn(begin, end) on consecutive ranges covering rows [0, n_rows): one range per pool thread
// when n_rows x elements_per_row reaches kMinParallelElements, else one call on the caller.
template <typename Fn>
void for_row_ranges(ThreadPool& pool, int n_rows, int64_t elements_per_row, Fn&& fn) {
  const int parts = std::min(pool.size(), n_rows);
  if (parts < 2 || int64_t{n_rows} * elements_per_row < kMinParallelElements) {
    fn(0, n_rows);
    return;
  }
  pool.run([&](int i) {
    if (i >= parts) return;
    fn(static_cast<int>(int64_t{n_rows} * i / parts),
       static_cast<int>(int64_t{n_rows} * (i + 1) / parts));
  });
}

}  // namespace k25
