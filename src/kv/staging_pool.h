// Staging buffers kept for reuse, up to a byte budget. A fresh staging buffer costs a mapping, a
// page fault per 4 KiB on first touch and an unmapping; in the Zen 5 VM of docs/benchmarks.md
// (session 38) the first touch of each 4 KiB of a buffer that had just received an O_DIRECT read
// cost ~4.5 us, 0.25 ms per 200 KiB L2 page (more than the read itself), on the engine thread.
// A reused buffer's pages are mapped already. KV pages of one model all have the same size, so
// buffers are kept by exact size.
//
// Not synchronised: its DiskStore's thread calls everything.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "kv/staging_buffer.h"

namespace k25 {

class StagingPool {
 public:
  // Keeps at most `budget_bytes` of returned buffers (0: keeps none).
  explicit StagingPool(size_t budget_bytes) : budget_(budget_bytes) {}

  // A buffer of exactly `bytes`: a kept one of that size, else a new one (empty() when the OS
  // refuses memory).
  StagingBuffer take(size_t bytes);
  // Keeps `buffer` for a later take() when the budget allows, else frees it now.
  void give(StagingBuffer buffer);

  size_t kept_bytes() const { return kept_bytes_; }
  size_t reused() const { return reused_; }  // take() calls served by a kept buffer

 private:
  size_t budget_;
  size_t kept_bytes_ = 0;
  size_t reused_ = 0;
  std::unordered_map<size_t, std::vector<StagingBuffer>> kept_;  // by size
};

}  // namespace k25
