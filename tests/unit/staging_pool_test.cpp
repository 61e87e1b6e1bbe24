#include "kv/staging_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

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

constexpr size_t kPage = StagingBuffer::kMapThreshold + 4096;  // a mapping of its own

TEST(StagingPool, AGivenBufferServesTheNextTakeOfItsSize) {
  StagingPool pool(2 * kPage);
  StagingBuffer a = pool.take(kPage);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.size(), kPage);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u) << "O_DIRECT needs it";
  std::memset(a.data(), 0x5a, a.size());
  const std::byte* at = a.data();
  pool.give(std::move(a));
  EXPECT_EQ(pool.kept_bytes(), kPage);
  EXPECT_EQ(pool.reused(), 0u);
  StagingBuffer b = pool.take(kPage);
  EXPECT_EQ(b.data(), at) << "the kept buffer, already mapped";
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.kept_bytes(), 0u);
  StagingBuffer c = pool.take(kPage);  // none kept: a new one
  EXPECT_NE(c.data(), at);
  EXPECT_EQ(pool.reused(), 1u);
}

TEST(StagingPool, SizesAreNotMixed) {
  StagingPool pool(4 * kPage);
  StagingBuffer a = pool.take(kPage);
  const std::byte* at = a.data();
  pool.give(std::move(a));
  StagingBuffer b = pool.take(kPage + 4096);
  EXPECT_EQ(b.size(), kPage + 4096);
  EXPECT_NE(b.data(), at);
  EXPECT_EQ(pool.reused(), 0u);
  EXPECT_EQ(pool.kept_bytes(), kPage) << "the smaller one is still kept";
}

TEST(StagingPool, BuffersBeyondTheBudgetAreFreed) {
  StagingPool pool(kPage);
  StagingBuffer a = pool.take(kPage), b = pool.take(kPage);
  const std::byte* b_at = b.data();
  pool.give(std::move(a));
  pool.give(std::move(b));
  EXPECT_EQ(pool.kept_bytes(), kPage);
  EXPECT_FALSE(mapped(b_at)) << "over the budget: unmapped at once";

  StagingPool none(0);
  StagingBuffer c = none.take(kPage);
  const std::byte* c_at = c.data();
  none.give(std::move(c));
  EXPECT_EQ(none.kept_bytes(), 0u);
  EXPECT_FALSE(mapped(c_at));
  none.give(StagingBuffer());  // an empty one is ignored
  EXPECT_EQ(none.kept_bytes(), 0u);
}

}  // namespace
}  // namespace k25
