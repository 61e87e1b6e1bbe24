#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace k25 {

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, std::string_view kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path, ": empty file, not a ", kind);
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    fail(path, ": cannot mmap: ", std::strerror(err));
  }
  return std::unique_ptr<MappedFile>(new MappedFile(fd, map, size));
}

MappedFile::~MappedFile() {
  munmap(data_, size_);
  ::close(fd_);
}

bool MappedFile::contains(const void* at, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(data_);
  const auto p = reinterpret_cast<uintptr_t>(at);
  return p >= begin && p - begin <= size_ && bytes <= size_ - (p - begin);
}

void MappedFile::read(const void* at, size_t bytes, void* dst) const {
  if (!contains(at, bytes)) fail("mapped file: read of ", bytes, " bytes outside the mapping");
  auto offset = static_cast<off_t>(static_cast<const uint8_t*>(at) - data());
  auto* out = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, out, bytes, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      fail("mapped file: read at offset ", offset, ": ",
           got == 0 ? "unexpected end of file" : std::strerror(errno));
    }
    out += got;
    offset += got;
    bytes -= static_cast<size_t>(got);
  }
}

void release_mapped_pages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + bytes) / page * page;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace k25
