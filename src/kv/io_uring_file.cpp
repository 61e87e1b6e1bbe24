#include "kv/io_uring_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace k25 {

IoUringFile::IoUringFile(const std::string& path, bool create, bool direct, unsigned queue_depth)
    : path_(path), queue_depth_(queue_depth) {
  if (queue_depth == 0) fail("L3 ", path, ": queue depth must be positive");
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  if (direct) {
    fd_ = ::open(path.c_str(), flags | O_DIRECT, 0644);
    if (fd_ >= 0) {
      direct_ = true;
    } else if (errno != EINVAL) {  // EINVAL: the file system refuses O_DIRECT
      fail("L3 ", path, ": cannot open: ", std::strerror(errno));
    }
  }
  if (fd_ < 0) {
    fd_ = ::open(path.c_str(), flags, 0644);
    if (fd_ < 0) fail("L3 ", path, ": cannot open: ", std::strerror(errno));
  }
  ring_ = new io_uring;
  const int rc = io_uring_queue_init(queue_depth, ring_, 0);
  if (rc < 0) {
    delete ring_;
    ring_ = nullptr;
    ::close(fd_);
    throw IoUringUnavailable(concat("L3 ", path, ": io_uring_queue_init(", queue_depth,
                                    ") failed: ", std::strerror(-rc)),
                             -rc);
  }
}

IoUringFile::~IoUringFile() {
  if (ring_) {
    io_uring_queue_exit(ring_);
    delete ring_;
  }
  if (fd_ >= 0) ::close(fd_);
}

bool IoUringFile::queue_read(void* buffer, size_t length, uint64_t offset, uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (!sqe) return false;
  io_uring_prep_read(sqe, fd_, buffer, static_cast<unsigned>(length), offset);
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool IoUringFile::queue_readv(const iovec* vectors, unsigned n, uint64_t offset,
                              uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (!sqe) return false;
  io_uring_prep_readv(sqe, fd_, vectors, n, offset);
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool IoUringFile::queue_writev(const iovec* vectors, unsigned n, uint64_t offset,
                               uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (!sqe) return false;
  io_uring_prep_writev(sqe, fd_, vectors, n, offset);
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

bool IoUringFile::queue_write(const void* buffer, size_t length, uint64_t offset,
                              uint64_t user_data) {
  io_uring_sqe* sqe = io_uring_get_sqe(ring_);
  if (!sqe) return false;
  io_uring_prep_write(sqe, fd_, buffer, static_cast<unsigned>(length), offset);
  io_uring_sqe_set_data64(sqe, user_data);
  return true;
}

int IoUringFile::submit() {
  return io_uring_submit(ring_);
}

size_t IoUringFile::reap(std::vector<Completion>& out, std::chrono::nanoseconds timeout) {
  size_t n = 0;
  io_uring_cqe* cqe = nullptr;
  if (io_uring_peek_cqe(ring_, &cqe) != 0 && timeout.count() > 0) {
    __kernel_timespec ts{};
    ts.tv_sec = timeout.count() / 1'000'000'000;
    ts.tv_nsec = timeout.count() % 1'000'000'000;
    // -ETIME on timeout, -EINTR on a signal: either way report what is there (maybe nothing).
    if (io_uring_wait_cqe_timeout(ring_, &cqe, &ts) != 0) return 0;
  }
  while (io_uring_peek_cqe(ring_, &cqe) == 0) {
    out.push_back({io_uring_cqe_get_data64(cqe), cqe->res});
    io_uring_cqe_seen(ring_, cqe);
    ++n;
  }
  return n;
}

uint64_t IoUringFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return 0;
  if (S_ISBLK(st.st_mode)) {
    uint64_t bytes = 0;
    return ::ioctl(fd_, BLKGETSIZE64, &bytes) == 0 ? bytes : 0;
  }
  return static_cast<uint64_t>(st.st_size);
}

int IoUringFile::datasync() const {
  return ::fdatasync(fd_) == 0 ? 0 : -errno;
}

bool IoUringFile::unlinked() const {
  struct stat open_file {
  }, at_path{};
  if (::fstat(fd_, &open_file) != 0) return false;
  if (::stat(path_.c_str(), &at_path) != 0) return true;
  return open_file.st_ino != at_path.st_ino || open_file.st_dev != at_path.st_dev;
}

int IoUringFile::preallocate(uint64_t bytes) const {
  const auto length = static_cast<off_t>(bytes);
  if (::fallocate(fd_, 0, 0, length) == 0) return 0;
  const int error = errno;
  if (::ftruncate(fd_, length) != 0) return -errno;
  return -error;
}

}  // namespace k25
