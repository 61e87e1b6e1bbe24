#include "kv/l3_page_table.h"

#include <gtest/gtest.h>

namespace k25 {
namespace {

TEST(L3SlotAllocator, FirstFitAndCoalescing) {
  L3SlotAllocator a(10);
  auto x = a.allocate(3), y = a.allocate(3), z = a.allocate(4);
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(x->first_slot, 0u);
  EXPECT_EQ(y->first_slot, 3u);
  EXPECT_EQ(z->first_slot, 6u);
  EXPECT_EQ(a.slots_free(), 0u);
  EXPECT_FALSE(a.allocate(1));
  a.release(*x);
  a.release(*z);
  EXPECT_FALSE(a.allocate(5)) << "two free runs of 3 and 4 are not one of 5";
  a.release(*y);  // joins both neighbours: one run of 10
  EXPECT_EQ(a.slots_free(), 10u);
  auto all = a.allocate(10);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->first_slot, 0u);
  EXPECT_FALSE(a.allocate(0));
}

TEST(L3SlotAllocator, ClaimMarksExactSlots) {
  L3SlotAllocator a(10);
  EXPECT_TRUE(a.claim({4, 2}));
  EXPECT_FALSE(a.claim({5, 1})) << "already used";
  EXPECT_FALSE(a.claim({9, 2})) << "past the end";
  EXPECT_EQ(a.slots_free(), 8u);
  auto first = a.allocate(4);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->first_slot, 0u);
  auto next = a.allocate(1);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->first_slot, 6u);
}

TEST(L3PageTable, PutReplacesAndReturnsOld) {
  L3PageTable t(10, 4096);
  EXPECT_FALSE(t.put(1, {{0, 1}, 5, 1}));
  auto old = t.put(1, {{1, 1}, 6, 2});
  ASSERT_TRUE(old);
  EXPECT_EQ(old->extent.first_slot, 0u);
  EXPECT_EQ(t.find(1)->length, 6u);
  EXPECT_TRUE(t.erase(1));
  EXPECT_FALSE(t.erase(1));
  EXPECT_EQ(t.size(), 0u);
}

TEST(L3PageTable, RecencyOrderIsLeastRecentlyUsedFirst) {
  L3PageTable t(10, 4096);
  for (L3Key key : {1, 2, 3, 4}) t.put(key, {{key, 1}, 5, 1});
  EXPECT_EQ(t.least_recently_used(), 1u);
  EXPECT_TRUE(t.touch(1));   // read
  EXPECT_FALSE(t.touch(9));  // not stored
  t.put(2, {{7, 1}, 5, 1});  // written again: one entry, the newest
  t.erase(3);
  EXPECT_EQ(t.keys_by_recency(), (std::vector<L3Key>{4, 1, 2}));
  EXPECT_EQ(t.least_recently_used(), 4u);
  L3PageTable moved = std::move(t);  // the order survives a move
  moved.touch(4);
  EXPECT_EQ(moved.keys_by_recency(), (std::vector<L3Key>{1, 2, 4}));
  for (L3Key key : {1, 2, 4}) moved.erase(key);
  EXPECT_FALSE(moved.least_recently_used());
}

TEST(L3PageTable, PutClaimedTakesFreeSlotsOnly) {
  L3PageTable t(10, 4096);
  EXPECT_TRUE(t.put_claimed(1, {{0, 2}, 5000, 1}));
  EXPECT_FALSE(t.put_claimed(2, {{1, 1}, 5, 1})) << "slot 1 is page 1's";
  EXPECT_FALSE(t.find(2));
  EXPECT_TRUE(t.put_claimed(1, {{1, 1}, 5, 1})) << "its own old slots are released first";
  EXPECT_EQ(t.slots().slots_free(), 9u);
  EXPECT_FALSE(t.put_claimed(1, {{9, 2}, 5000, 1})) << "past the end";
  EXPECT_EQ(t.find(1)->extent.first_slot, 1u) << "a refused put changes nothing";
  EXPECT_EQ(t.slots().slots_free(), 9u);
}

}  // namespace
}  // namespace k25
