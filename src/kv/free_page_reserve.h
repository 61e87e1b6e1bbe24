// How many free KV pages to keep resident when the others give their memory back to the OS
// (PagePool::release_free_memory): the pool's mean demand per release interval over the last
// kWindow intervals, what the next interval is likely to allocate. A resident page is reused
// for free; a released one is zero-filled by a page fault per 4 KiB when it is written again
// (0.7 ms per 192 KiB page in the shadow-paged VM of docs/benchmarks.md "Session 39", where an
// L3 restore of 70 pages spent most of its 50 ms in those faults). A server that goes quiet
// still shrinks to its pages in use, kWindow intervals after its last allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace k25 {

class FreePageReserve {
 public:
  static constexpr size_t kWindow = 8;

  // Called once per release interval with the pool's allocation count (PagePool::allocations)
  // now: the number of free pages to keep resident until the next call.
  size_t update(uint64_t allocations);

 private:
  std::array<uint64_t, kWindow> demand_{};  // pages allocated per interval, a ring
  size_t next_ = 0;
  uint64_t last_allocations_ = 0;
};

}  // namespace k25
