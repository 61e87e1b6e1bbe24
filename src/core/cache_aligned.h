// Vectors whose data starts on a 64-byte cache line. Threads that write neighbouring parts of one
// buffer (attention's outputs: each task its heads or its chunk of positions) then share no line
// as long as each part is a whole number of lines: an attention output row written through a
// 16-byte-aligned std::vector put the first and last line of each task's part on the other
// thread's part too, and the two threads kept taking the line from each other (session 45:
// `kernels_bench` BM_AttendDecode at 2 threads 30% slower with outputs 16 bytes off a line).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace k25 {

inline constexpr size_t kCacheLine = 64;

template <typename T>
struct CacheAlignedAllocator {
  using value_type = T;
  CacheAlignedAllocator() = default;
  template <typename U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, size_t) noexcept { ::operator delete (p, std::align_val_t{kCacheLine}); }
  friend bool operator==(const CacheAlignedAllocator&, const CacheAlignedAllocator&) {
    return true;
  }
};

template <typename T>
using CacheAlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

}  // namespace k25
