// A whole file mapped read-only into memory (model weights are read straight from the mapping).
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

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

// Drops the whole pages inside [data, data + bytes) of a read-only file mapping from memory (they
// are read again from the file if touched); failure only leaves them resident.
void release_mapped_pages(const void* data, size_t bytes);

}  // namespace k25
