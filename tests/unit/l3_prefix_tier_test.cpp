// L3PrefixTier: prefix-cache pages to disk and back (byte-exact), the header check, and the
// least recently used pages making room when the capacity is used up (across a restart, and
// once per page however often it was written).
#include "kv/l3_prefix_tier.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "kv/io_uring_file.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

// Reads a chain and waits for its reads (5 s at most), as the engine does over several steps.
size_t restore_now(L3PrefixTier& tier, const std::vector<CachedPage>& chain,
                   std::vector<bool>* kept) {
  const L3RestoreId id = tier.begin_restore(chain);
  for (int i = 0; i < 50 && !tier.restore_done(id); ++i) tier.poll(std::chrono::milliseconds(100));
  return tier.finish_restore(id, kept);
}

constexpr PageGeometry kGeometry{4, 2, 8};  // 4 positions, 2 layers, kv_dim 8: 512 bytes

class L3PrefixTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/k25-l3-prefix-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A tier whose capacity holds `pages` stored pages (one 4 KiB slot each).
  std::unique_ptr<L3PrefixTier> open(PagePool& pool, int pages) {
    DiskStoreOptions o;
    o.path = dir_;
    o.capacity_bytes = static_cast<uint64_t>(pages) * 4096;
    try {
      return std::make_unique<L3PrefixTier>(o, pool);
    } catch (const IoUringUnavailable& e) {
      ADD_FAILURE() << "io_uring is not available here (" << e.what() << "): the L3 tests need it";
      return nullptr;
    }
  }
  // Fills every K/V float of `page` from `seed`.
  static void fill(PagePool& pool, PageId page, float seed) {
    const PageGeometry& g = pool.geometry();
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (int i = 0; i < g.page_tokens * g.kv_dim; ++i) {
        pool.keys(page, layer)[i] = seed + static_cast<float>(i);
        pool.values(page, layer)[i] = -seed - static_cast<float>(i);
      }
    }
  }
  static bool holds(PagePool& pool, PageId page, float seed) {
    const PageGeometry& g = pool.geometry();
    for (int layer = 0; layer < g.n_layers; ++layer) {
      for (int i = 0; i < g.page_tokens * g.kv_dim; ++i) {
        if (pool.keys(page, layer)[i] != seed + static_cast<float>(i)) return false;
        if (pool.values(page, layer)[i] != -seed - static_cast<float>(i)) return false;
      }
    }
    return true;
  }

  std::string dir_;
};

bool restore_one(L3PrefixTier& tier, const CachedPage& page) {
  std::vector<bool> kept;
  const bool ok = restore_now(tier, {page}, &kept) == 1;
  EXPECT_FALSE(kept[0]);
  return ok;
}

TEST_F(L3PrefixTierTest, SpilledPagesComeBackByteExactOnlyForTheirPrefix) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  auto tier = open(pool, 16);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  const PageId page = *pool.allocate();
  fill(pool, page, 100);
  tier->spill({11, 10, tokens.data(), page}, SpillSource::kCopy);
  tier->spill({11, 10, tokens.data(), page}, SpillSource::kPage);  // stored already: no write
  tier->limit_in_flight(0);
  EXPECT_EQ(tier->stats().spills, 1u);
  fill(pool, page, 0);

  EXPECT_TRUE(restore_one(*tier, {11, 10, tokens.data(), page}));
  EXPECT_TRUE(holds(pool, page, 100));
  // Another parent or other tokens: not used, counted, and the page is forgotten.
  const std::vector<int32_t> other = {5, 6, 7, 9};
  EXPECT_FALSE(restore_one(*tier, {11, 10, other.data(), page}));
  EXPECT_EQ(tier->stats().restore_failures, 1u);
  EXPECT_FALSE(tier->contains(11));
  EXPECT_FALSE(restore_one(*tier, {12, 10, tokens.data(), page}));  // never stored: a miss
  EXPECT_EQ(tier->stats().restore_failures, 1u);
  EXPECT_EQ(tier->stats().restores, 1u);
}

// Pages whose K/V bytes are whole 4 KiB: the header is padded to a slot of its own, so the K/V
// bytes are read straight into the L2 page with only the header staged, and a page still takes
// one slot more than its K/V bytes, as with the unpadded header.
TEST_F(L3PrefixTierTest, WholeKibPagesAreReadIntoL2InPlaceInNoMoreSlots) {
  const PageGeometry geometry{4, 2, 256};  // f32: 4 KiB blocks, 16 KiB of K/V per page
  PagePool pool(geometry, 8 * PagePool::page_bytes_for(geometry));
  DiskStoreOptions o;
  o.path = dir_;
  o.capacity_bytes = 3 * 5 * 4096;  // three pages of 5 slots
  L3PrefixTier tier(o, pool);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  for (uint64_t key = 1; key <= 3; ++key) {
    fill(pool, page, static_cast<float>(10 * key));
    tier.spill({key, 0, tokens.data(), page}, SpillSource::kCopy);
    tier.limit_in_flight(0);
  }
  EXPECT_EQ(tier.stats().spills, 3u);
  EXPECT_EQ(tier.stats().dropped, 0u);
  for (uint64_t key = 1; key <= 3; ++key) {
    fill(pool, page, 0);
    const L3RestoreId id = tier.begin_restore({{key, 0, tokens.data(), page}});
    EXPECT_LE(tier.store().read_staging_in_use(), 4096u) << "only the header is staged";
    for (int i = 0; i < 50 && !tier.restore_done(id); ++i)
      tier.poll(std::chrono::milliseconds(100));
    std::vector<bool> kept;
    ASSERT_EQ(tier.finish_restore(id, &kept), 1u) << key;
    EXPECT_TRUE(holds(pool, page, static_cast<float>(10 * key))) << key;
  }
  const std::vector<int32_t> other = {1, 2, 3, 5};
  EXPECT_FALSE(restore_one(tier, {2, 0, other.data(), page}));  // the header still decides
  EXPECT_EQ(tier.stats().restore_failures, 1u);
}

// kPage: a page whose K/V blocks are whole 4 KiB is written from the L2 page itself, only its
// header copied; the tier holds a reference on the page until the write completes. kCopy, a
// page that cannot be written in place, or a pool without a free page to spare: copied, and the
// page is the caller's again at once.
TEST_F(L3PrefixTierTest, SpillsFromThePageHoldItUntilTheWriteCompletes) {
  const PageGeometry geometry{4, 2, 256};  // f32: 4 KiB blocks, 16 KiB of K/V per page
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  DiskStoreOptions o;
  o.path = dir_;
  o.capacity_bytes = 8 * 5 * 4096;
  L3PrefixTier tier(o, pool);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  const uint64_t copied_before = tier.store().stats().bytes_copied;
  fill(pool, page, 7);
  tier.spill({1, 0, tokens.data(), page}, SpillSource::kPage);
  EXPECT_EQ(pool.ref_count(page), 2u);
  EXPECT_EQ(tier.pages_held_for_writes(), 1u);
  EXPECT_EQ(tier.store().stats().bytes_copied - copied_before, 4096u) << "only the header";
  tier.limit_in_flight(0);
  EXPECT_EQ(pool.ref_count(page), 1u) << "given back when the write completed";
  EXPECT_EQ(tier.pages_held_for_writes(), 0u);
  EXPECT_EQ(tier.stats().spills, 1u);

  tier.spill({2, 0, tokens.data(), page}, SpillSource::kCopy);
  EXPECT_EQ(pool.ref_count(page), 1u);
  EXPECT_EQ(tier.store().stats().bytes_copied - copied_before, 2 * 4096u + 4 * 4096u);
  tier.limit_in_flight(0);

  // Every other page in use: none to spare for a page waiting for its write.
  std::vector<PageId> others;
  while (auto p = pool.allocate()) others.push_back(*p);
  ASSERT_EQ(pool.pages_free(), 0u);
  tier.spill({3, 0, tokens.data(), page}, SpillSource::kPage);
  EXPECT_EQ(pool.ref_count(page), 1u);
  EXPECT_EQ(tier.pages_held_for_writes(), 0u);
  tier.limit_in_flight(0);
  for (PageId p : others) pool.free(p);

  fill(pool, page, 0);
  for (uint64_t key = 1; key <= 3; ++key) {
    EXPECT_TRUE(restore_one(tier, {key, 0, tokens.data(), page})) << key;
    EXPECT_TRUE(holds(pool, page, 7)) << key;
  }
}

TEST_F(L3PrefixTierTest, PagesThatCannotBeWrittenInPlaceAreCopiedWhateverTheSource) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));  // 256-byte blocks
  auto tier = open(pool, 16);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  const PageId page = *pool.allocate();
  fill(pool, page, 3);
  tier->spill({11, 10, tokens.data(), page}, SpillSource::kPage);
  EXPECT_EQ(pool.ref_count(page), 1u);
  EXPECT_EQ(tier->pages_held_for_writes(), 0u);
  tier->limit_in_flight(0);
  fill(pool, page, 0);
  EXPECT_TRUE(restore_one(*tier, {11, 10, tokens.data(), page}));
  EXPECT_TRUE(holds(pool, page, 3));
}

// A page held for its write whose tier goes away first is given back to the pool.
TEST_F(L3PrefixTierTest, ATierClosingWithWritesInFlightGivesTheirPagesBack) {
  const PageGeometry geometry{4, 2, 256};
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  DiskStoreOptions o;
  o.path = dir_;
  o.capacity_bytes = 8 * 5 * 4096;
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  fill(pool, page, 9);
  {
    L3PrefixTier tier(o, pool);
    tier.spill({1, 0, tokens.data(), page}, SpillSource::kPage);
    EXPECT_EQ(pool.ref_count(page), 2u);
  }
  EXPECT_EQ(pool.ref_count(page), 1u);
  L3PrefixTier reopened(o, pool);
  fill(pool, page, 0);
  EXPECT_TRUE(restore_one(reopened, {1, 0, tokens.data(), page}));
  EXPECT_TRUE(holds(pool, page, 9));
}

// A follow-up turn can arrive while the pages of its history are still being written (the
// write was submitted, its completion not yet polled): they count as held, and the restore waits
// for the write instead of recomputing them (EngineL3.PagesEvictedFromL2ComeBackFromL3 failed
// that way in a loaded CI run).
TEST_F(L3PrefixTierTest, APageWhoseWriteIsInFlightIsRestoredNotRecomputed) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  auto tier = open(pool, 16);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> first = {1, 2, 3, 4}, second = {5, 6, 7, 8};
  const PageId a = *pool.allocate(), b = *pool.allocate();
  fill(pool, a, 21);
  tier->spill({31, 0, first.data(), a}, SpillSource::kCopy);
  tier->limit_in_flight(0);  // the chain's first page is stored
  fill(pool, b, 22);
  tier->spill({32, 31, second.data(), b}, SpillSource::kCopy);  // its write is not polled yet
  EXPECT_EQ(tier->disk_stats().writes_in_flight, 1u);
  EXPECT_TRUE(tier->contains(32));
  for (PageId p : {a, b}) fill(pool, p, 0);
  std::vector<bool> kept;
  EXPECT_EQ(restore_now(*tier, {{31, 0, first.data(), a}, {32, 31, second.data(), b}}, &kept), 2u);
  EXPECT_TRUE(holds(pool, a, 21));
  EXPECT_TRUE(holds(pool, b, 22));
  EXPECT_EQ(tier->stats().restore_failures, 0u);
}

TEST_F(L3PrefixTierTest, TheOldestPagesMakeRoomWhenTheCapacityIsUsedUp) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  auto tier = open(pool, 3);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  for (uint64_t key = 1; key <= 5; ++key) {
    fill(pool, page, static_cast<float>(key));
    tier->spill({key, 0, tokens.data(), page}, SpillSource::kCopy);
    tier->limit_in_flight(0);
  }
  EXPECT_EQ(tier->stats().spills, 5u);
  EXPECT_EQ(tier->stats().spill_failures, 0u);
  EXPECT_EQ(tier->stats().dropped, 2u);
  EXPECT_FALSE(tier->contains(1));
  EXPECT_FALSE(tier->contains(2));
  for (uint64_t key = 3; key <= 5; ++key) {
    ASSERT_TRUE(restore_one(*tier, {key, 0, tokens.data(), page})) << key;
    EXPECT_TRUE(holds(pool, page, static_cast<float>(key))) << key;
  }
}

TEST_F(L3PrefixTierTest, ARestoredPageIsKeptOverOlderUnusedOnesAcrossARestart) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  const auto spill = [&](L3PrefixTier& tier, uint64_t key) {
    fill(pool, page, static_cast<float>(key));
    tier.spill({key, 0, tokens.data(), page}, SpillSource::kCopy);
    tier.limit_in_flight(0);
  };
  {
    auto tier = open(pool, 3);
    ASSERT_TRUE(tier);
    for (uint64_t key = 1; key <= 3; ++key) spill(*tier, key);
    ASSERT_TRUE(restore_one(*tier, {1, 0, tokens.data(), page}));  // page 1 is used again
    spill(*tier, 4);
    EXPECT_FALSE(tier->contains(2)) << "the least recently used page makes room";
    EXPECT_TRUE(tier->contains(1));
  }
  auto tier = open(pool, 3);
  ASSERT_TRUE(tier);
  spill(*tier, 5);  // the order was kept: 3 is now the least recently used
  EXPECT_FALSE(tier->contains(3));
  for (uint64_t key : {1, 4, 5}) {
    ASSERT_TRUE(restore_one(*tier, {key, 0, tokens.data(), page})) << key;
    EXPECT_TRUE(holds(pool, page, static_cast<float>(key))) << key;
  }
  EXPECT_EQ(tier->stats().dropped, 1u);
}

TEST_F(L3PrefixTierTest, APageWrittenAgainAfterAFailedRestoreIsEvictedByItsNewAge) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  auto tier = open(pool, 3);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> tokens = {1, 2, 3, 4}, other = {9, 9, 9, 9};
  const PageId page = *pool.allocate();
  const auto spill = [&](uint64_t key) {
    fill(pool, page, static_cast<float>(key));
    tier->spill({key, 0, tokens.data(), page}, SpillSource::kCopy);
    tier->limit_in_flight(0);
  };
  for (uint64_t key = 1; key <= 3; ++key) spill(key);
  EXPECT_FALSE(restore_one(*tier, {1, 0, other.data(), page}));  // refused and forgotten
  EXPECT_FALSE(tier->contains(1));
  spill(1);  // recomputed and written again: the newest page, with one age
  spill(4);
  EXPECT_TRUE(tier->contains(1)) << "evicted by the age of its first write";
  EXPECT_FALSE(tier->contains(2));
  EXPECT_TRUE(tier->contains(3));
  spill(5);
  EXPECT_TRUE(tier->contains(1));
  EXPECT_FALSE(tier->contains(3));
  EXPECT_EQ(tier->stats().dropped, 2u);
  EXPECT_EQ(tier->store().keys_by_recency(), (std::vector<L3Key>{1, 4, 5}));
}

TEST_F(L3PrefixTierTest, PagesSurviveReopeningTheStore) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  const PageId page = *pool.allocate();
  {
    auto tier = open(pool, 4);
    ASSERT_TRUE(tier);
    fill(pool, page, 7);
    tier->spill({42, 0, tokens.data(), page}, SpillSource::kCopy);
  }
  fill(pool, page, 0);
  auto tier = open(pool, 4);
  ASSERT_TRUE(tier);
  EXPECT_TRUE(restore_one(*tier, {42, 0, tokens.data(), page}));
  EXPECT_TRUE(holds(pool, page, 7));
}

TEST_F(L3PrefixTierTest, AChainIsRestoredUpToItsFirstBadPage) {
  PagePool pool(kGeometry, 8 * PagePool::page_bytes_for(kGeometry));
  auto tier = open(pool, 8);
  ASSERT_TRUE(tier);
  const std::vector<int32_t> tokens = {1, 2, 3, 4}, other = {9, 9, 9, 9};
  std::vector<PageId> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*pool.allocate());
  for (uint64_t key = 1; key <= 3; ++key) {
    fill(pool, pages[0], static_cast<float>(key));
    tier->spill({key, key - 1, tokens.data(), pages[0]}, SpillSource::kCopy);
  }
  tier->limit_in_flight(0);
  // Pages 1 and 3 as stored, page 2 expected with other tokens, key 4 never stored.
  const std::vector<CachedPage> chain = {{1, 0, tokens.data(), pages[0]},
                                         {2, 1, other.data(), pages[1]},
                                         {3, 2, tokens.data(), pages[2]},
                                         {4, 3, tokens.data(), pages[3]}};
  std::vector<bool> kept;
  EXPECT_EQ(restore_now(*tier, chain, &kept), 1u);
  EXPECT_EQ(kept, std::vector<bool>(4, false));
  EXPECT_TRUE(holds(pool, pages[0], 1));
  EXPECT_EQ(tier->stats().restores, 1u);
  EXPECT_EQ(tier->stats().restore_failures, 1u);
  EXPECT_FALSE(tier->contains(2));  // the bad page is forgotten, the good one after it kept
  EXPECT_TRUE(tier->contains(3));
}

}  // namespace
}  // namespace k25
