#include "kv/staging_buffer.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace k25 {
namespace {

// Whether the OS page at `p` is mapped (mincore fails with ENOMEM on an unmapped address).
bool mapped(const void* p) {
  unsigned char resident = 0;
  return ::mincore(const_cast<void*>(p), 1, &resident) == 0;
}

TEST(StagingBuffer, SmallOnesAreAlignedAndWritable) {
  StagingBuffer buffer(3 * 4096 + 17);
  ASSERT_FALSE(buffer.empty());
  EXPECT_EQ(buffer.size(), 3u * 4096 + 17);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 4096, 0u) << "O_DIRECT needs it";
  std::memset(buffer.data(), 0xab, buffer.size());
  EXPECT_EQ(buffer.data()[buffer.size() - 1], std::byte{0xab});
}

TEST(StagingBuffer, LargeOnesAreUnmappedWhenTheyGo) {
  const void* at = nullptr;
  {
    const size_t bytes = StagingBuffer::kMapThreshold + 17;
    StagingBuffer buffer(bytes);
    ASSERT_FALSE(buffer.empty());
    EXPECT_EQ(buffer.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % 4096, 0u) << "O_DIRECT needs it";
    std::memset(buffer.data(), 0xab, buffer.size());
    EXPECT_EQ(buffer.data()[buffer.size() - 1], std::byte{0xab});
    at = buffer.data();
    EXPECT_TRUE(mapped(at));
  }
  EXPECT_FALSE(mapped(at)) << "the memory left the process with the buffer";
}

TEST(StagingBuffer, MovesOwnershipAndZeroBytesIsEmpty) {
  EXPECT_TRUE(StagingBuffer(0).empty());
  StagingBuffer a(4096);
  std::byte* data = a.data();
  StagingBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.data(), data);
  StagingBuffer c(StagingBuffer::kMapThreshold);
  const void* old = c.data();
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  EXPECT_FALSE(mapped(old)) << "assignment unmaps what it replaces";
}

}  // namespace
}  // namespace k25
