// A 4096-aligned buffer for O_DIRECT transfers. A large one (an L2 page: hundreds of KiB) is its
// own mapping, unmapped when it goes, so the memory of a finished transfer leaves the process at
// once instead of staying in malloc's heap (whose high-water mark is what a server's RSS shows);
// a small one comes from aligned_alloc, which costs no system call.
#pragma once

#include <cstddef>

namespace k25 {

class StagingBuffer {
 public:
  StagingBuffer() = default;
  static constexpr size_t kMapThreshold = size_t{64} << 10;

  // `bytes` of memory (a mapping, faulted in, from kMapThreshold on); empty() when the OS
  // refuses.
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
  size_t bytes_ = 0, mapped_ = 0;  // mapped_: 0 for aligned_alloc memory
};

}  // namespace k25
