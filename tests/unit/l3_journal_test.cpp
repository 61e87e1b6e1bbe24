// The L3 index journal: replay rebuilds the page table and its recency order; a torn tail, a
// corrupt record and a record that contradicts the table end the replay (nothing after them is
// trusted); a damaged header, another page size or content tag is refused.
#include "kv/l3_journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kPage = 4096;
constexpr uint64_t kSlots = 100;
constexpr uint64_t kTag = 42;
constexpr uint64_t kDataBytes = kSlots * kPage;

L3Entry entry(uint64_t first_slot, uint32_t n_slots = 1, uint32_t crc = 7) {
  return {{first_slot, n_slots}, uint64_t{n_slots} * kPage - 10, crc};
}

class L3JournalTest : public ::testing::Test {
 protected:
  void TearDown() override {
    fs::remove(path_);
    fs::remove(path_ + ".tmp");
  }
  L3JournalReplay replay(uint64_t data_bytes = kDataBytes) {
    return L3Journal::replay(path_, kSlots, kPage, kTag, data_bytes);
  }
  // A journal holding pages 1..3 on slots 0, 1, 3-4 (written in that order), then page 1 read.
  void write_three(L3Journal& journal) {
    L3PageTable empty(kSlots, kPage);
    journal.rewrite(empty);
    journal.record_put(1, entry(0));
    journal.record_put(2, entry(1));
    journal.record_put(3, entry(3, 2));
    journal.record_touch(1);
    ASSERT_EQ(journal.flush(), 0);
  }
  uintmax_t size() const { return fs::file_size(path_); }
  void flip_byte(uintmax_t at) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x10));
  }

  std::string path_ =
      (fs::temp_directory_path() / ("k25-l3-journal-test-" + std::to_string(getpid()))).string();
};

TEST_F(L3JournalTest, ReplayRebuildsThePagesAndTheirRecencyOrder) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  journal.record_erase(2);
  journal.record_put(4, entry(1));  // reuses page 2's slot
  journal.record_put(3, entry(5));  // rewritten elsewhere: slots 3-4 are free again
  ASSERT_EQ(journal.flush(), 0);
  EXPECT_EQ(journal.records_in_file(), 7u);
  EXPECT_EQ(size(), L3Journal::kHeaderBytes + 7 * L3Journal::kRecordBytes);

  L3JournalReplay r = replay();
  EXPECT_EQ(r.records, 7u);
  EXPECT_EQ(r.ignored_bytes, 0u);
  EXPECT_EQ(r.tail_problem, "");
  EXPECT_EQ(r.table.keys_by_recency(), (std::vector<L3Key>{1, 4, 3}));
  EXPECT_EQ(r.table.find(3)->extent.first_slot, 5u);
  EXPECT_EQ(r.table.find(4)->crc, 7u);
  EXPECT_EQ(r.table.slots().slots_free(), kSlots - 3);
  EXPECT_TRUE(r.table.slots().claim({3, 2})) << "page 3's old slots were released";

  // Compaction keeps the pages and the order, in one record each.
  journal.rewrite(r.table);
  EXPECT_EQ(size(), L3Journal::kHeaderBytes + 3 * L3Journal::kRecordBytes);
  EXPECT_EQ(replay().table.keys_by_recency(), (std::vector<L3Key>{1, 4, 3}));
}

TEST_F(L3JournalTest, ATornTailIsIgnored) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  fs::resize_file(path_, size() - 7);  // the touch of page 1 was half-written at the crash
  const L3JournalReplay r = replay();
  EXPECT_EQ(r.records, 3u);
  EXPECT_EQ(r.ignored_bytes, L3Journal::kRecordBytes - 7);
  EXPECT_NE(r.tail_problem.find("record 3 at byte 152 is torn"), std::string::npos)
      << r.tail_problem;
  EXPECT_EQ(r.table.keys_by_recency(), (std::vector<L3Key>{1, 2, 3}));
}

TEST_F(L3JournalTest, ACorruptRecordEndsTheReplayAndNothingAfterItIsTrusted) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  flip_byte(L3Journal::kHeaderBytes + L3Journal::kRecordBytes + 9);  // page 2's key
  const L3JournalReplay r = replay();
  EXPECT_EQ(r.records, 1u);
  EXPECT_EQ(r.ignored_bytes, 3 * L3Journal::kRecordBytes);
  EXPECT_NE(r.tail_problem.find("fails its checksum"), std::string::npos) << r.tail_problem;
  EXPECT_EQ(r.table.keys(), std::vector<L3Key>{1});
}

TEST_F(L3JournalTest, ARecordThatContradictsTheTableEndsTheReplay) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  journal.record_put(9, entry(4));    // slot 4 is page 3's
  journal.record_put(10, entry(50));  // valid, but after a contradiction: not trusted
  L3Entry bad = entry(60);
  bad.length = 3 * kPage;  // three slots' worth in one slot
  journal.record_put(11, bad);
  ASSERT_EQ(journal.flush(), 0);
  L3JournalReplay r = replay();
  EXPECT_EQ(r.records, 4u);
  EXPECT_NE(r.tail_problem.find("on slots another page holds"), std::string::npos);
  EXPECT_FALSE(r.table.find(9));
  EXPECT_FALSE(r.table.find(10));

  L3Journal other(path_, kPage, kTag);
  other.rewrite(L3PageTable(kSlots, kPage));
  other.record_put(11, bad);
  ASSERT_EQ(other.flush(), 0);
  r = replay();
  EXPECT_NE(r.tail_problem.find("has length"), std::string::npos) << r.tail_problem;
}

TEST_F(L3JournalTest, PagesPastTheDataFileAreDropped) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  const L3JournalReplay r = replay(2 * kPage);  // the data file was truncated to two slots
  EXPECT_EQ(r.dropped, 1u);
  EXPECT_EQ(r.table.keys(), (std::vector<L3Key>{1, 2}));
  EXPECT_EQ(r.tail_problem, "");
  EXPECT_EQ(L3Journal::replay(path_, 2, kPage, kTag, kDataBytes).table.size(), 2u)
      << "or the capacity shrank";
}

TEST_F(L3JournalTest, ADamagedOrForeignHeaderIsRefused) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  EXPECT_THROW(L3Journal::replay(path_, kSlots, 8192, kTag, kDataBytes), Error);
  EXPECT_THROW(L3Journal::replay(path_, kSlots, kPage, kTag + 1, kDataBytes), Error);
  flip_byte(20);  // in the content tag
  try {
    replay();
    ADD_FAILURE() << "a damaged header was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("header checksum mismatch"), std::string::npos);
  }
  fs::resize_file(path_, 10);
  EXPECT_THROW(replay(), Error);
  fs::remove(path_);
  EXPECT_THROW(replay(), Error);
}

TEST_F(L3JournalTest, ADeletedJournalIsNoticedAndRewritingRecreatesIt) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  EXPECT_FALSE(journal.unlinked());
  fs::remove(path_);
  EXPECT_TRUE(journal.unlinked());
  L3PageTable table(kSlots, kPage);
  table.put(5, entry(0));
  journal.rewrite(table);
  EXPECT_FALSE(journal.unlinked());
  journal.record_touch(5);
  ASSERT_EQ(journal.flush(), 0);
  EXPECT_EQ(journal.sync(), 0);
  EXPECT_EQ(replay().table.keys(), std::vector<L3Key>{5});
}

TEST_F(L3JournalTest, AFailedRewriteLeavesItBrokenAndTheOldFileIntact) {
  L3Journal journal(path_, kPage, kTag);
  write_three(journal);
  L3Journal elsewhere(path_ + "-missing-dir/index", kPage, kTag);
  EXPECT_THROW(elsewhere.rewrite(L3PageTable(kSlots, kPage)), Error);
  EXPECT_TRUE(elsewhere.broken());
  elsewhere.record_touch(1);
  EXPECT_LT(elsewhere.flush(), 0) << "a broken journal appends nothing";
  EXPECT_FALSE(elsewhere.has_buffered());
  EXPECT_EQ(replay().records, 4u);
}

}  // namespace
}  // namespace k25
