// Page reference counts, shared page tables and the prefix index (kv/prefix_cache.h).
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "core/error.h"
#include "kv/paged_kv_cache.h"

namespace k25 {
namespace {

constexpr int kPageTokens = 4;

// A cache of `pages` pages of kPageTokens positions (1 layer, kv_dim 2).
std::unique_ptr<PagedKvCache> make_kv(size_t pages) {
  const size_t page_bytes = PagePool::page_bytes_for({kPageTokens, 1, 2});
  return std::make_unique<PagedKvCache>(1, 2, 1024, pages * page_bytes, kPageTokens);
}

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Publishes the first `n_pages` pages of `seq` (holding `tokens`), as the engine does.
void publish(PrefixCache& cache, const PagedKvCache& kv, int seq,
             const std::vector<int32_t>& tokens, size_t n_pages, bool session = false) {
  std::vector<uint64_t> keys;
  cache.chain_keys(tokens.data(), n_pages, &keys);
  cache.insert(keys.data(), keys.size(), tokens.data(), kv.page_table(seq), session);
}

std::vector<PageId> find(PrefixCache& cache, const std::vector<int32_t>& tokens, size_t n_pages) {
  std::vector<uint64_t> keys;
  cache.chain_keys(tokens.data(), n_pages, &keys);
  return cache.lookup(keys.data(), keys.size(), tokens.data());
}

TEST(PagePoolRefs, RetainKeepsAPageUntilTheLastFree) {
  PagePool pool({kPageTokens, 1, 2}, PagePool::page_bytes_for({kPageTokens, 1, 2}) * 2);
  const PageId page = *pool.allocate();
  EXPECT_EQ(pool.ref_count(page), 1u);
  pool.retain(page);
  EXPECT_EQ(pool.ref_count(page), 2u);
  EXPECT_FALSE(pool.free(page));
  EXPECT_EQ(pool.pages_used(), 1u);
  EXPECT_TRUE(pool.free(page));
  EXPECT_EQ(pool.pages_used(), 0u);
  EXPECT_EQ(pool.ref_count(page), 0u);
  EXPECT_THROW(pool.free(page), Error);
  EXPECT_THROW(pool.retain(page), Error);
  EXPECT_THROW(pool.retain(99), Error);
}

TEST(PagedKvCacheShare, AdoptedPagesAreSharedAndSurviveClear) {
  auto kv = make_kv(8);
  kv->reserve(0, 8);  // two pages
  int n = 0;
  kv->values(0, 0, 5, &n)[0] = 42.0f;
  const std::vector<PageId> pages = kv->page_table(0);
  kv->adopt(1, pages);
  EXPECT_EQ(kv->page_table(1), pages);
  EXPECT_EQ(kv->pages_used(), 2u);
  EXPECT_EQ(kv->values(1, 0, 5, &n)[0], 42.0f);
  kv->reserve(1, 9);  // a page of its own after the shared ones
  EXPECT_EQ(kv->pages_used(), 3u);
  kv->clear(0);
  EXPECT_EQ(kv->pages_used(), 3u);  // still referenced by sequence 1
  EXPECT_EQ(kv->values(1, 0, 5, &n)[0], 42.0f);
  kv->clear(1);
  EXPECT_EQ(kv->pages_used(), 0u);
}

TEST(PagedKvCacheShare, AdoptRejectsASequenceWithPagesAndForeignPages) {
  auto kv = make_kv(8);
  kv->reserve(0, 4);
  const std::vector<PageId> pages = kv->page_table(0);
  EXPECT_THROW(kv->adopt(0, pages), Error);
  EXPECT_THROW(kv->adopt(1, {pages[0], 7}), Error);  // page 7 was never allocated
  EXPECT_TRUE(kv->page_table(1).empty());
  EXPECT_EQ(kv->pool().ref_count(pages[0]), 1u);  // the failed adopt took no reference
}

TEST(PrefixCache, FindsTheLongestMatchingChainOfFullPages) {
  auto kv = make_kv(16);
  PrefixCache cache(kv->pool(), 7);
  kv->set_reclaimer(&cache);
  const std::vector<int32_t> a = iota_tokens(14, 100);  // 3 full pages + 2 tokens
  kv->reserve(0, 14);
  publish(cache, *kv, 0, a, 3);
  EXPECT_EQ(cache.pages(), 3u);
  const std::vector<PageId> a_pages = kv->page_table(0);
  kv->clear(0);
  EXPECT_EQ(kv->pages_used(), 3u);  // the cache keeps the three full pages
  EXPECT_EQ(cache.reclaimable(), 3u);

  // Same first two pages, different third page: two pages match.
  std::vector<int32_t> b = a;
  b[9] = 5;
  EXPECT_EQ(find(cache, b, 3), std::vector<PageId>(a_pages.begin(), a_pages.begin() + 2));
  // The whole chain.
  EXPECT_EQ(find(cache, a, 3), std::vector<PageId>(a_pages.begin(), a_pages.begin() + 3));
  // A different first page matches nothing, even if later pages are equal.
  std::vector<int32_t> c = a;
  c[0] = 1;
  EXPECT_TRUE(find(cache, c, 3).empty());
  // Only as many pages as asked for.
  EXPECT_EQ(find(cache, a, 1).size(), 1u);
  EXPECT_EQ(cache.stats().hit_pages, 6u);
}

TEST(PrefixCache, EqualPagesAreCachedOnceAndTheDuplicateGoesBack) {
  auto kv = make_kv(16);
  PrefixCache cache(kv->pool(), 7);
  kv->set_reclaimer(&cache);
  const std::vector<int32_t> t = iota_tokens(8, 3);
  kv->reserve(0, 8);
  kv->reserve(1, 8);
  publish(cache, *kv, 0, t, 2);
  publish(cache, *kv, 1, t, 2);
  EXPECT_EQ(cache.pages(), 2u);
  EXPECT_EQ(cache.stats().inserted_pages, 2u);
  kv->clear(0);
  kv->clear(1);
  EXPECT_EQ(kv->pages_used(), 2u);
}

TEST(PrefixCache, ReserveEvictsIdlePagesLeavesFirstAndNeverPinnedOnes) {
  auto kv = make_kv(6);
  PrefixCache cache(kv->pool(), 7);
  kv->set_reclaimer(&cache);
  std::vector<uint64_t> evicted;
  cache.set_evict_hook([&](const CachedPage& p, PrefixCache::EvictCause cause) {
    EXPECT_EQ(cause, PrefixCache::EvictCause::kReclaim);  // an allocation needs the memory
    evicted.push_back(p.key);
  });
  const std::vector<int32_t> a = iota_tokens(12, 10);
  kv->reserve(0, 12);
  publish(cache, *kv, 0, a, 3);
  kv->clear(0);
  const std::vector<int32_t> b = iota_tokens(8, 50);
  kv->reserve(1, 8);
  publish(cache, *kv, 1, b, 2);
  kv->clear(1);
  ASSERT_EQ(kv->pages_used(), 5u);
  ASSERT_EQ(kv->pages_available(), 6u);  // one free, five idle

  // Sequence 2 uses chain b: b's pages are pinned.
  const std::vector<PageId> b_pages = find(cache, b, 2);
  ASSERT_EQ(b_pages.size(), 2u);
  kv->adopt(2, b_pages);
  EXPECT_EQ(cache.reclaimable(), 3u);
  EXPECT_EQ(kv->pages_available(), 4u);
  EXPECT_TRUE(kv->can_reserve(3, 16));
  EXPECT_FALSE(kv->can_reserve(3, 17));

  // Three pages needed, one free: two evictions, the deepest pages of chain a first.
  kv->reserve(3, 12);
  std::vector<uint64_t> a_keys;
  cache.chain_keys(a.data(), 3, &a_keys);
  EXPECT_EQ(evicted, (std::vector<uint64_t>{a_keys[2], a_keys[1]}));
  EXPECT_EQ(find(cache, a, 3).size(), 1u);
  // The pinned chain is never taken: two pages cannot be had, and a failed reserve evicts
  // nothing; one page can (a's first).
  EXPECT_THROW(kv->reserve(4, 8), Error);
  EXPECT_EQ(cache.stats().evicted_pages, 2u);
  kv->reserve(4, 4);
  EXPECT_EQ(cache.stats().evicted_pages, 3u);
  EXPECT_TRUE(find(cache, a, 3).empty());
  EXPECT_EQ(find(cache, b, 2), b_pages);
  EXPECT_EQ(cache.reclaimable(), 0u);
}

TEST(PrefixCache, PagesOfSessionsAreEvictedLast) {
  auto kv = make_kv(3);
  PrefixCache cache(kv->pool(), 7);
  kv->set_reclaimer(&cache);
  const std::vector<int32_t> session = iota_tokens(4, 10), other = iota_tokens(4, 20);
  kv->reserve(0, 4);
  publish(cache, *kv, 0, session, 1, /*session=*/true);
  kv->clear(0);
  kv->reserve(1, 4);
  publish(cache, *kv, 1, other, 1);
  kv->clear(1);
  ASSERT_EQ(find(cache, session, 1).size(), 1u);
  ASSERT_EQ(find(cache, other, 1).size(), 1u);  // the other page is the most recent now
  kv->reserve(2, 8);  // one free page, one eviction: the page without a session goes
  EXPECT_TRUE(find(cache, other, 1).empty());
  EXPECT_EQ(find(cache, session, 1).size(), 1u);
  kv->clear(2);
  kv->reserve(2, 12);  // all three pages: the session's page goes too when nothing else is left
  EXPECT_TRUE(find(cache, session, 1).empty());
}

TEST(PrefixCache, IdleEvictionTakesOnlyPagesUntouchedSinceTheCutoffAndNotPinned) {
  auto kv = make_kv(6);
  PrefixCache cache(kv->pool(), 7);
  std::vector<uint64_t> evicted;
  cache.set_evict_hook([&](const CachedPage& page, PrefixCache::EvictCause cause) {
    EXPECT_EQ(cause, PrefixCache::EvictCause::kIdle);
    evicted.push_back(page.key);
  });
  const std::vector<int32_t> old_tokens = iota_tokens(8, 10), pinned = iota_tokens(4, 30);
  kv->reserve(0, 8);
  publish(cache, *kv, 0, old_tokens, 2);
  kv->clear(0);
  kv->reserve(1, 4);
  publish(cache, *kv, 1, pinned, 1);                          // sequence 1 keeps using its page
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // touch times strictly apart
  const auto cutoff = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::vector<int32_t> recent = iota_tokens(4, 50);
  kv->reserve(2, 4);
  publish(cache, *kv, 2, recent, 1);
  kv->clear(2);
  // Both pages of old_tokens, deepest first; at most max_pages per call.
  EXPECT_EQ(cache.evict_idle_since(cutoff, 1), 1u);
  EXPECT_EQ(cache.evict_idle_since(cutoff, 5), 1u);
  std::vector<uint64_t> old_keys;
  cache.chain_keys(old_tokens.data(), 2, &old_keys);
  EXPECT_EQ(evicted, (std::vector<uint64_t>{old_keys[1], old_keys[0]}));
  EXPECT_TRUE(find(cache, old_tokens, 2).empty());
  EXPECT_EQ(find(cache, pinned, 1).size(), 1u);
  EXPECT_EQ(find(cache, recent, 1).size(), 1u);
  EXPECT_EQ(cache.evict_idle_since(std::chrono::steady_clock::now()), 1u);  // `recent` only
  EXPECT_EQ(cache.pages(), 1u);
}

TEST(PrefixCache, DestructionReturnsItsPages) {
  auto kv = make_kv(4);
  {
    PrefixCache cache(kv->pool(), 7);
    const std::vector<int32_t> t = iota_tokens(8, 1);
    kv->reserve(0, 8);
    publish(cache, *kv, 0, t, 2);
    kv->clear(0);
    EXPECT_EQ(kv->pages_used(), 2u);
  }
  EXPECT_EQ(kv->pages_used(), 0u);
}

TEST(PrefixCache, KeysDependOnTheSeedAndExtendIncrementally) {
  auto kv = make_kv(1);
  PrefixCache one(kv->pool(), 1), two(kv->pool(), 2);
  const std::vector<int32_t> t = iota_tokens(12, 0);
  std::vector<uint64_t> all, step, other;
  one.chain_keys(t.data(), 3, &all);
  one.chain_keys(t.data(), 1, &step);
  one.chain_keys(t.data(), 3, &step);
  EXPECT_EQ(all, step);
  two.chain_keys(t.data(), 3, &other);
  EXPECT_NE(all[0], other[0]);
  EXPECT_NE(all[0], all[1]);
}

}  // namespace
}  // namespace k25
