#include "kv/staging_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

namespace k25 {
namespace {

constexpr size_t kAlignment = 4096;  // O_DIRECT's

void release(std::byte* data, size_t mapped) {
  if (!data) return;
  if (mapped) {
    ::munmap(data, mapped);
  } else {
    std::free(data);
  }
}

}  // namespace

StagingBuffer::StagingBuffer(size_t bytes) {
  if (bytes == 0) return;
  if (bytes < kMapThreshold) {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(kAlignment, rounded));
    if (data_) bytes_ = bytes;
    return;
  }
  const size_t os_page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + os_page - 1) / os_page * os_page;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return;
  data_ = static_cast<std::byte*>(p);
  bytes_ = bytes;
  mapped_ = mapped;
}

StagingBuffer::~StagingBuffer() {
  release(data_, mapped_);
}

StagingBuffer::StagingBuffer(StagingBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& other) noexcept {
  if (this != &other) {
    release(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void StagingBuffer::leak() {
  data_ = nullptr;
  bytes_ = mapped_ = 0;
}

}  // namespace k25
