// A whole file mapped read-only into memory (model weights are read straight from the mapping),
// with the file kept open for reads that bypass the mapping (read()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace k25 {

class MappedFile {
 public:
  // Maps a regular, non-empty file; `kind` names the expected format in the error for an empty
  // file ("<path>: empty file, not a <kind>"). Throws k25::Error naming the path.
  static std::unique_ptr<MappedFile> open(const std::string& path, std::string_view kind);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t size() const { return size_; }
  // Whether [at, at + bytes) lies inside the mapping.
  bool contains(const void* at, size_t bytes) const;
  // Copies the `bytes` at `at` (inside the mapping) into `dst` by reading the file, so that no
  // page of the mapping becomes resident: for small lookups such as one token's embedding row,
  // which through the mapping map the whole page-cache folio around it (2 MiB on ext4 with large
  // folios, Linux 6.18), so that a few dozen distinct tokens put a model's whole embedding table
  // in the process's resident set. Throws k25::Error on a range outside the mapping or a failed
  // read.
  void read(const void* at, size_t bytes, void* dst) const;

 private:
  MappedFile(int fd, void* data, size_t size) : fd_(fd), data_(data), size_(size) {}
  int fd_;
  void* data_;
  size_t size_;
};

// Drops the whole pages inside [data, data + bytes) of a read-only file mapping from memory (they
// are read again from the file if touched); failure only leaves them resident.
void release_mapped_pages(const void* data, size_t bytes);

}  // namespace k25
