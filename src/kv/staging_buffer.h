// A page-aligned buffer for O_DIRECT transfers, mapped from the OS on its own and unmapped when
// it goes: the memory of a finished transfer leaves the process at once, instead of staying in
// malloc's heap (whose high-water mark is what a server's RSS shows).
#pragma once

#include <cstddef>

namespace k25 {

class StagingBuffer {
 public:
  StagingBuffer() = default;
  // Maps `bytes` (rounded up to whole OS pages), faulted in; empty() when the OS refuses.
  explicit StagingBuffer(size_t bytes);
  ~StagingBuffer();
  StagingBuffer(StagingBuffer&& other) noexcept;
  StagingBuffer& operator=(StagingBuffer&& other) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }
  // Forgets the mapping without unmapping it: for a buffer the kernel may still write into.
  void leak();

 private:
  std::byte* data_ = nullptr;
  size_t bytes_ = 0, mapped_ = 0;
};

}  // namespace k25
