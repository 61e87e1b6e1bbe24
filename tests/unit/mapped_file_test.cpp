#include "core/mapped_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

// A file of `bytes` bytes whose byte i is (i * 7 + i / 4096) % 251, removed at scope exit.
class PatternFile {
 public:
  explicit PatternFile(size_t bytes)
      : path_((fs::temp_directory_path() / ("k25-mapped-" + std::to_string(getpid()))).string()) {
    std::vector<char> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(byte(i));
    std::ofstream(path_, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
  }
  ~PatternFile() { fs::remove(path_); }
  static uint8_t byte(size_t i) { return static_cast<uint8_t>((i * 7 + i / 4096) % 251); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Whether the OS page holding `p` is mapped in this process (/proc/self/pagemap bit 63).
bool page_present(const void* p) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uint64_t entry = 0;
  const auto offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page * sizeof(entry));
  const bool ok = ::pread(fd, &entry, sizeof(entry), offset) == sizeof(entry);
  ::close(fd);
  return ok && (entry >> 63) != 0;
}

TEST(MappedFile, ReadCopiesTheFilesBytesAtAnAddressOfTheMapping) {
  const size_t size = (size_t{3} << 20) + 123;
  PatternFile file(size);
  const auto mapped = MappedFile::open(file.path(), "test file");
  ASSERT_EQ(mapped->size(), size);
  for (const size_t at : {size_t{0}, size_t{4095}, size_t{1} << 20, size - 816}) {
    std::vector<uint8_t> row(816);
    mapped->read(mapped->data() + at, row.size(), row.data());
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(row[i], PatternFile::byte(at + i)) << "offset " << at + i;
    }
  }
}

TEST(MappedFile, ReadRefusesRangesOutsideTheMapping) {
  PatternFile file(10000);
  const auto mapped = MappedFile::open(file.path(), "test file");
  uint8_t buf[16];
  EXPECT_TRUE(mapped->contains(mapped->data() + 9984, 16));
  EXPECT_FALSE(mapped->contains(mapped->data() + 9985, 16));
  EXPECT_FALSE(mapped->contains(mapped->data() - 1, 1));
  EXPECT_THROW(mapped->read(mapped->data() + 9990, 16, buf), Error);
  EXPECT_THROW(mapped->read(buf, 16, buf), Error);
}

// The point of read(): a lookup of a few hundred bytes does not map the mapping's pages (through
// the mapping it maps at least the page, on Linux 6.18 with ext4 the whole 2 MiB folio).
TEST(MappedFile, ReadLeavesTheMappingsPagesUnmapped) {
  PatternFile file(size_t{4} << 20);
  const auto mapped = MappedFile::open(file.path(), "test file");
  const uint8_t* at = mapped->data() + (size_t{3} << 20) + 100;
  std::vector<uint8_t> row(816);
  mapped->read(at, row.size(), row.data());
  EXPECT_FALSE(page_present(at));
  EXPECT_EQ(row[0], PatternFile::byte((size_t{3} << 20) + 100));
  // The same lookup through the mapping maps the page (so the check above can fail).
  EXPECT_EQ(*static_cast<const volatile uint8_t*>(at), row[0]);
  EXPECT_TRUE(page_present(at));
}

TEST(MappedFile, GgufTensorsKnowTheMappingTheyLieIn) {
  K25_REQUIRE_SHARED();
  const std::string path = testing::shared_path("models/stories260K-q8_0.gguf");
  const auto gguf = GgufFile::open(path);
  const TensorView* embd = gguf->tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  ASSERT_NE(embd->file, nullptr);
  EXPECT_TRUE(embd->file->contains(embd->data, embd->bytes));
  EXPECT_EQ(gguf->tensor("output.weight")->file, embd->file);
}

}  // namespace
}  // namespace k25
