#include "kv/l3_page_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "util/error.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

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

class L3PageTableFile : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove(path_); }
  std::string path_ =
      (fs::temp_directory_path() / ("k25-l3-index-test-" + std::to_string(getpid()) + ".index"))
          .string();
};

TEST_F(L3PageTableFile, SaveLoadRoundTrip) {
  L3PageTable t(100, 4096);
  auto e1 = t.slots().allocate(1), e2 = t.slots().allocate(3);
  t.put(7, {*e1, 4000, 0x1234});
  t.put(9, {*e2, 3 * 4096, 0x5678});
  t.save(path_, 42);
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  size_t dropped = 99;
  L3PageTable u = L3PageTable::load(path_, 100, 4096, 42, 100 * 4096, &dropped);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u.find(7)->length, 4000u);
  EXPECT_EQ(u.find(9)->crc, 0x5678u);
  EXPECT_EQ(u.find(9)->extent.first_slot, 1u);
  EXPECT_EQ(u.slots().slots_free(), 96u) << "loaded extents are claimed";
  // Entries beyond the data file's end are dropped, not trusted.
  L3PageTable v = L3PageTable::load(path_, 100, 4096, 42, 2 * 4096, &dropped);
  EXPECT_EQ(dropped, 1u);
  EXPECT_TRUE(v.find(7));
  EXPECT_FALSE(v.find(9));
}

TEST_F(L3PageTableFile, RejectsDamageAndMismatches) {
  L3PageTable t(100, 4096);
  t.put(7, {*t.slots().allocate(1), 10, 1});
  t.save(path_, 42);
  size_t dropped = 0;
  EXPECT_THROW(L3PageTable::load(path_, 100, 8192, 42, 1 << 20, &dropped), Error);  // page size
  EXPECT_THROW(L3PageTable::load(path_, 100, 4096, 43, 1 << 20, &dropped), Error);  // other tag
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50);
    f.put('\x5A');
  }
  try {
    L3PageTable::load(path_, 100, 4096, 42, 1 << 20, &dropped);
    FAIL() << "a damaged index must not load";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  fs::resize_file(path_, 20);
  EXPECT_THROW(L3PageTable::load(path_, 100, 4096, 42, 1 << 20, &dropped), Error);
  fs::remove(path_);
  EXPECT_THROW(L3PageTable::load(path_, 100, 4096, 42, 1 << 20, &dropped), Error);
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

}  // namespace
}  // namespace k25
