#include "kv/page_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/error.h"

namespace k25 {
namespace {

bool aligned(const float* p) {
  return reinterpret_cast<uintptr_t>(p) % PagePool::kAlignment == 0;
}

// Allocates every page the pool will give (in shard 0) and returns their ids.
std::vector<PageId> allocate_all(PagePool& pool) {
  std::vector<PageId> pages;
  while (auto page = pool.allocate()) pages.push_back(*page);
  return pages;
}

TEST(PagePool, NeverExceedsItsBudget) {
  // 3 positions x 5 floats = 60 bytes per block, padded to 64: 2 layers x K,V = 256 bytes a page.
  const PageGeometry geometry{/*page_tokens=*/3, /*n_layers=*/2, /*kv_dim=*/5};
  for (size_t budget : {size_t{0}, size_t{255}, size_t{256}, size_t{1000}, size_t{5} << 20}) {
    PagePool pool(geometry, budget);
    EXPECT_EQ(pool.page_bytes(), 256u);
    EXPECT_EQ(pool.bytes_allocated(), 0u) << "slabs must be allocated lazily";
    const std::vector<PageId> pages = allocate_all(pool);
    EXPECT_EQ(pages.size(), budget / 256);
    EXPECT_LE(pages.size() * pool.page_bytes(), budget);
    EXPECT_LE(pool.bytes_allocated(), budget);
    EXPECT_EQ(pool.pages_used(), pages.size());
    EXPECT_EQ(pool.pages_total(), pages.size());
    EXPECT_EQ(pool.pages_free(), 0u);
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_EQ(std::set<PageId>(pages.begin(), pages.end()).size(), pages.size());
  }
}

TEST(PagePool, AllocatesSlabsOnlyAsPagesAreNeeded) {
  const PageGeometry geometry{16, 4, 256};  // 16 KiB blocks, 128 KiB pages: 16 pages per slab
  PagePool pool(geometry, size_t{40} * 128 * 1024);
  ASSERT_EQ(pool.pages_total(), 40u);
  pool.allocate();
  EXPECT_EQ(pool.bytes_allocated(), PagePool::kSlabTargetBytes);
  for (int i = 1; i < 17; ++i) pool.allocate();
  EXPECT_EQ(pool.bytes_allocated(), 2 * PagePool::kSlabTargetBytes);
  allocate_all(pool);
  EXPECT_EQ(pool.bytes_allocated(), pool.budget_bytes()) << "the last slab holds the 8 left";
}

TEST(PagePool, BlocksAreAlignedDisjointAndKeepTheirData) {
  const PageGeometry geometry{3, 2, 5};
  PagePool pool(geometry, size_t{3} << 20);  // several slabs of 256-byte pages
  const std::vector<PageId> pages = allocate_all(pool);
  auto fill = [&](PageId page, int layer, bool value) {
    return static_cast<float>(page * 4 + layer * 2 + (value ? 1 : 0));
  };
  for (PageId page : pages) {
    for (int layer = 0; layer < geometry.n_layers; ++layer) {
      for (bool value : {false, true}) {
        float* block = value ? pool.values(page, layer) : pool.keys(page, layer);
        ASSERT_TRUE(aligned(block));
        std::fill(block, block + geometry.page_tokens * geometry.kv_dim, fill(page, layer, value));
      }
    }
  }
  for (PageId page : pages) {
    for (int layer = 0; layer < geometry.n_layers; ++layer) {
      for (bool value : {false, true}) {
        const float* block = value ? pool.values(page, layer) : pool.keys(page, layer);
        for (int i = 0; i < geometry.page_tokens * geometry.kv_dim; ++i) {
          ASSERT_EQ(block[i], fill(page, layer, value)) << "page " << page << " layer " << layer;
        }
      }
    }
  }
}

// Blocks of whole 4 KiB lie on 4 KiB boundaries in every slab: an O_DIRECT read (an L3 restore,
// disk_store.h) can land in them in place.
TEST(PagePool, BlocksOfWhole4KiBAreOsPageAligned) {
  const PageGeometry geometry{16, 3, 128, KvDtype::kF16};  // 4096-byte blocks
  PagePool pool(geometry, size_t{5} << 20);                // several slabs
  for (PageId page : allocate_all(pool)) {
    for (int layer = 0; layer < geometry.n_layers; ++layer) {
      ASSERT_EQ(reinterpret_cast<uintptr_t>(pool.key_block(page, layer)) % 4096, 0u) << page;
      ASSERT_EQ(reinterpret_cast<uintptr_t>(pool.value_block(page, layer)) % 4096, 0u) << page;
    }
  }
}

TEST(PagePool, FreedPagesAreReused) {
  PagePool pool({4, 1, 16}, 10 * 512);
  std::vector<PageId> pages = allocate_all(pool);
  ASSERT_EQ(pages.size(), 10u);
  pool.free(pages[3]);
  pool.free(pages[7]);
  EXPECT_EQ(pool.pages_used(), 8u);
  EXPECT_EQ(pool.pages_free(), 2u);
  EXPECT_EQ(pool.allocate(), pages[7]);  // most recently freed first: still warm in cache
  EXPECT_EQ(pool.allocate(), pages[3]);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.bytes_allocated(), 10u * 512);
}

// Resident OS pages among the whole OS pages inside `page` (mincore).
size_t resident_os_pages(const PagePool& pool, PageId page) {
  const uintptr_t os_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(pool.keys(page, 0));
  const uintptr_t first = (begin + os_page - 1) / os_page * os_page;
  const uintptr_t last = (begin + pool.page_bytes()) / os_page * os_page;
  std::vector<unsigned char> in_core((last - first) / os_page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(first), last - first, in_core.data()), 0);
  size_t n = 0;
  for (unsigned char c : in_core) n += c & 1;
  return n;
}

TEST(PagePool, ReleasedFreePagesLeaveMemoryAndComeBackUsable) {
  // 64 positions x 256 floats = 64 KiB per block, 2 layers: 256 KiB pages (64 OS pages each).
  const PageGeometry geometry{64, 2, 256};
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  const PageId kept = *pool.allocate(), freed = *pool.allocate();
  const size_t floats = pool.page_bytes() / sizeof(float);
  std::fill_n(pool.keys(kept, 0), floats, 1.0f);
  std::fill_n(pool.keys(freed, 0), floats, 2.0f);
  const size_t whole = resident_os_pages(pool, freed);
  ASSERT_GE(whole, 63u);
  EXPECT_EQ(pool.release_free_memory(), 0u);  // nothing free yet
  pool.free(freed);
  EXPECT_EQ(pool.release_free_memory(), whole * ::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_os_pages(pool, freed), 0u);
  EXPECT_EQ(pool.release_free_memory(), 0u);  // released already
  EXPECT_EQ(resident_os_pages(pool, kept), whole);
  EXPECT_EQ(pool.keys(kept, 1)[5], 1.0f);
  // The released page is handed out again and holds what is written to it.
  const PageId again = *pool.allocate();
  EXPECT_EQ(again, freed);
  std::fill_n(pool.keys(again, 0), floats, 3.0f);
  EXPECT_EQ(pool.values(again, 1)[7], 3.0f);
  EXPECT_EQ(resident_os_pages(pool, again), whole);
}

TEST(PagePool, ReleaseKeepsTheMostRecentlyFreedPagesResidentAndHandsThemOutFirst) {
  const PageGeometry geometry{64, 2, 256};  // 256 KiB pages
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  PageId pages[3];
  for (PageId& page : pages) {
    page = *pool.allocate();
    std::fill_n(pool.keys(page, 0), pool.page_bytes() / sizeof(float), 1.0f);
  }
  EXPECT_EQ(pool.allocations(), 3u);
  const size_t whole = resident_os_pages(pool, pages[0]);
  for (PageId page : pages) pool.free(page);
  // The two most recently freed stay; the first gives its memory back.
  EXPECT_EQ(pool.release_free_memory(2), whole * ::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(resident_os_pages(pool, pages[0]), 0u);
  EXPECT_EQ(resident_os_pages(pool, pages[1]), whole);
  EXPECT_EQ(resident_os_pages(pool, pages[2]), whole);
  EXPECT_EQ(pool.release_free_memory(5), 0u);  // more than are free: nothing more to release
  EXPECT_EQ(*pool.allocate(), pages[2]);
  EXPECT_EQ(*pool.allocate(), pages[1]);
  EXPECT_EQ(pool.release_free_memory(0), 0u);  // the one left free was released already
  EXPECT_EQ(pool.allocations(), 5u);
}

// A released page (a fresh one may share an OS page with the allocator's own writes, e.g. a
// sanitizer's fill, so the test starts from a release, which leaves no OS page mapped).
TEST(PagePool, PopulateMapsAReleasedPageWithoutWritingIt) {
  const PageGeometry geometry{64, 2, 256};  // 256 KiB pages
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  const PageId page = *pool.allocate();
  std::fill_n(pool.keys(page, 0), pool.page_bytes() / sizeof(float), 1.0f);
  const size_t whole = resident_os_pages(pool, page);
  ASSERT_GE(whole, 63u);
  pool.free(page);
  pool.release_free_memory();
  const PageId again = *pool.allocate();
  ASSERT_EQ(again, page);
  EXPECT_EQ(resident_os_pages(pool, again), 0u);
  pool.populate(again);
  EXPECT_EQ(resident_os_pages(pool, again), whole);
  EXPECT_EQ(pool.keys(again, 1)[9], 0.0f);  // mapped, not written: still the kernel's zeros
  pool.free(again);
  EXPECT_THROW(pool.populate(again), Error);  // not allocated
  EXPECT_THROW(pool.populate(1000), Error);   // beyond the pool
}

TEST(PagePool, RejectsFreeingAPageThatIsNotAllocated) {
  PagePool pool({4, 1, 16}, 10 * 512);
  const PageId page = *pool.allocate();
  pool.free(page);
  EXPECT_THROW(pool.free(page), Error);
  EXPECT_THROW(pool.free(page + 1), Error);  // never handed out
  EXPECT_THROW(pool.free(1000), Error);      // beyond the pool
  EXPECT_EQ(pool.pages_used(), 0u);
}

TEST(PagePool, RejectsBadShapes) {
  EXPECT_THROW(PagePool({0, 1, 16}, 1 << 20), Error);
  EXPECT_THROW(PagePool({16, 0, 16}, 1 << 20), Error);
  EXPECT_THROW(PagePool({16, 1, -2}, 1 << 20), Error);
  EXPECT_NO_THROW(PagePool({16, 1, 16}, 1 << 20));
}

}  // namespace
}  // namespace k25
