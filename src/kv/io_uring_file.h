// One file (or block device) plus one io_uring instance: asynchronous positioned reads and
// writes, completions reaped with a bounded wait. The file is opened with O_DIRECT when asked;
// a file system that refuses O_DIRECT (open fails with EINVAL) gets buffered I/O instead, and
// direct() says which one is in use (the owner warns). Buffers, offsets and lengths must be
// 4096-aligned for O_DIRECT; the caller (DiskStore) guarantees that.
//
// Not synchronised: one thread drives queue_*/submit/reap.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

struct io_uring;
struct iovec;

namespace k25 {

// Thrown when io_uring itself cannot be set up (ENOSYS: old kernel, EPERM: disabled by
// kernel.io_uring_disabled or a seccomp filter), as opposed to a file that cannot be opened.
class IoUringUnavailable : public Error {
 public:
  IoUringUnavailable(const std::string& what, int error) : Error(what), error_(error) {}
  int error() const { return error_; }

 private:
  int error_;
};

class IoUringFile {
 public:
  struct Completion {
    uint64_t user_data;
    int result;  // bytes transferred, or -errno
  };

  // Opens `path` read-write (created with mode 0644 when `create`), then sets up a ring of
  // `queue_depth` entries. Throws k25::Error naming the path and errno text when the file
  // cannot be opened, IoUringUnavailable when the ring cannot be created.
  IoUringFile(const std::string& path, bool create, bool direct, unsigned queue_depth);
  ~IoUringFile();
  IoUringFile(const IoUringFile&) = delete;
  IoUringFile& operator=(const IoUringFile&) = delete;

  // Queue one request; false when the ring's submission queue is full (submit() or reap first).
  bool queue_read(void* buffer, size_t length, uint64_t offset, uint64_t user_data);
  bool queue_write(const void* buffer, size_t length, uint64_t offset, uint64_t user_data);
  // A read scattered over (a write gathered from) `n` buffers in order; `vectors` must stay
  // valid until the completion.
  bool queue_readv(const iovec* vectors, unsigned n, uint64_t offset, uint64_t user_data);
  bool queue_writev(const iovec* vectors, unsigned n, uint64_t offset, uint64_t user_data);
  // Hands queued requests to the kernel. Returns how many, or -errno (they stay queued).
  int submit();
  // Appends finished requests to `out`. Waits up to `timeout` for the first one when none is
  // ready (zero: never blocks). Returns how many were appended.
  size_t reap(std::vector<Completion>& out, std::chrono::nanoseconds timeout);

  bool direct() const { return direct_; }
  unsigned queue_depth() const { return queue_depth_; }
  const std::string& path() const { return path_; }
  // Current size in bytes (a block device's capacity).
  uint64_t size() const;
  // fdatasync(); 0 or -errno.
  int datasync() const;
  // The path no longer names the open file (deleted or replaced since it was opened).
  bool unlinked() const;
  // Grows a regular file to `bytes` with blocks reserved (fallocate), so that later writes
  // neither extend the file (an extending O_DIRECT write is serialised by the file system) nor
  // find the disk full. When the file system cannot reserve them (EOPNOTSUPP, ENOSPC), the file
  // is only extended, sparse, and that error is returned: the caller warns. 0 or -errno.
  int preallocate(uint64_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
  unsigned queue_depth_ = 0;
  io_uring* ring_ = nullptr;
};

}  // namespace k25
