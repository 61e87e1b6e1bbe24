#include "kv/lru_k_prefetcher.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "kv/l3_key.h"

namespace k25 {
namespace {

using Ranges = std::vector<PageRange>;

TEST(LruKPrefetcher, ProposesNeighboursFromTheThirdAccess) {
  LruKPrefetcher p;  // K = 3, distance 1
  const PageRange r{5, 8, 2};
  EXPECT_TRUE(p.record(r).empty());
  EXPECT_TRUE(p.record(r).empty());
  const Ranges want{{5, 6, 2}, {5, 10, 2}};
  EXPECT_EQ(p.record(r), want);
  EXPECT_EQ(p.record(r), want) << "a hot range keeps proposing; the caller skips resident pages";
  EXPECT_EQ(p.accesses(r), 3);
}

TEST(LruKPrefetcher, RangesAreExactAndStreamsSeparate) {
  LruKPrefetcher p;
  p.record({1, 0, 4});
  p.record({1, 0, 4});
  EXPECT_TRUE(p.record({1, 0, 2}).empty()) << "another range of the same stream";
  EXPECT_TRUE(p.record({2, 0, 4}).empty()) << "the same range of another stream";
  EXPECT_EQ(p.accesses({1, 0, 4}), 2);
  EXPECT_TRUE(p.record({1, 0, 0}).empty());
  EXPECT_EQ(p.accesses({1, 0, 0}), 0) << "empty ranges are ignored";
}

TEST(LruKPrefetcher, ClipsAtPageZeroAndHonoursDistance) {
  LruKPrefetcher p(3, 64, 2);
  for (int i = 0; i < 2; ++i) p.record({0, 0, 3});
  EXPECT_EQ(p.record({0, 0, 3}), (Ranges{{0, 3, 3}, {0, 6, 3}})) << "nothing before page 0";
  for (int i = 0; i < 2; ++i) p.record({0, 4, 3});
  EXPECT_EQ(p.record({0, 4, 3}), (Ranges{{0, 1, 3}, {0, 0, 1}, {0, 7, 3}, {0, 10, 3}}));
}

TEST(LruKPrefetcher, EvictsByBackwardKDistance) {
  LruKPrefetcher p(3, 3);
  const PageRange hot{0, 0, 1}, a{0, 1, 1}, b{0, 2, 1}, c{0, 3, 1};
  for (int i = 0; i < 3; ++i) p.record(hot);
  p.record(a);
  p.record(b);
  p.record(c);  // over capacity: a (seen once, oldest) goes, not the hot range
  EXPECT_EQ(p.tracked(), 3u);
  EXPECT_EQ(p.accesses(a), 0);
  EXPECT_EQ(p.accesses(hot), 3);
  EXPECT_EQ(p.accesses(b), 1);
  EXPECT_EQ(p.accesses(c), 1);
}

TEST(LruKPrefetcher, NewRangesCanBecomeHotWhenHistoryIsFullOfHotOnes) {
  LruKPrefetcher p(3, 2);
  const PageRange h1{0, 0, 1}, h2{0, 1, 1}, fresh{0, 2, 1};
  for (int i = 0; i < 3; ++i) p.record(h1);
  for (int i = 0; i < 3; ++i) p.record(h2);
  p.record(fresh);  // h1 (oldest 3rd access) goes, not the range just seen
  EXPECT_EQ(p.accesses(fresh), 1);
  EXPECT_EQ(p.accesses(h1), 0);
  p.record(fresh);
  EXPECT_FALSE(p.record(fresh).empty());
}

TEST(LruKPrefetcher, RejectsBadParameters) {
  EXPECT_THROW(LruKPrefetcher(0), Error);
  EXPECT_THROW(LruKPrefetcher(LruKPrefetcher::kMaxK + 1), Error);
  EXPECT_THROW(LruKPrefetcher(3, 0), Error);
  EXPECT_THROW(LruKPrefetcher(3, 10, 0), Error);
}

TEST(L3Key, PacksStreamAndPage) {
  const L3Key key = l3_page_key(0xABCDE12345ull, 777);
  EXPECT_EQ(l3_key_stream(key), 0xABCDE12345ull);
  EXPECT_EQ(l3_key_page(key), 777u);
  EXPECT_NE(l3_page_key(1, 0), l3_page_key(0, 1));
}

}  // namespace
}  // namespace k25
