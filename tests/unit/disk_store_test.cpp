// The L3 disk tier against real files and the real io_uring (failing, with the reason, where the
// sandbox forbids io_uring: these tests are the only check of the disk tier). Every test works in
// its own temporary directory, removed at the end.
#include "kv/disk_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kv/l2_page_spans.h"
#include "kv/l3_journal.h"
#include "kv/page_pool.h"
#include "kv/staging_buffer.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kWait = 10s;  // generous: a bound so that a bug fails the test instead of hanging

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "k25-l3-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) fail("mkdtemp failed: ", std::strerror(errno));
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

// Page `i`'s contents: distinct for every (key, byte) so a misplaced page is noticed.
std::vector<std::byte> page_bytes(uint64_t key, size_t length) {
  std::vector<std::byte> out(length);
  std::mt19937_64 rng(key * 7919 + length);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

DiskStoreOptions options_for(const std::string& dir) {
  DiskStoreOptions o;
  o.path = dir;
  o.capacity_bytes = 64 << 20;
  o.queue_depth = 16;
  return o;
}

// Where in the data file `needle` starts (the test's pages are random bytes: unique).
long find_in_file(const std::string& path, const std::vector<std::byte>& needle) {
  std::ifstream in(path, std::ios::binary);
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = data.find(std::string(reinterpret_cast<const char*>(needle.data()), 64));
  return at == std::string::npos ? -1 : static_cast<long>(at);
}

class DiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      DiskStoreOptions o = options_for(dir_.path);
      o.persist_on_close = false;
      DiskStore probe(o);
    } catch (const IoUringUnavailable& e) {
      FAIL() << "io_uring is not available here (" << e.what()
             << "): the L3 tests need it (a kernel with io_uring, kernel.io_uring_disabled=0, "
                "no seccomp filter against io_uring_setup)";
    }
    fs::remove(dir_.path + "/k25-l3.data");
  }

  L3Completion write_and_wait(DiskStore& store, L3Key key, const std::vector<std::byte>& bytes) {
    return store.wait(store.submit_write(key, bytes), kWait);
  }
  L3Completion read_and_wait(DiskStore& store, L3Key key, std::vector<std::byte>& out) {
    return store.wait(store.submit_read(key, out), kWait);
  }
  void check_l2_round_trip(const std::string& dir, int kv_dim);
  static bool has_warning(const DiskStore& store, const std::string& part) {
    for (const auto& w : store.warnings())
      if (w.find(part) != std::string::npos) return true;
    return false;
  }

  TempDir dir_;
};

TEST_F(DiskStoreTest, ManyPagesInFlightRoundTripByteExact) {
  DiskStore store(options_for(dir_.path));
  EXPECT_TRUE(store.stats().direct_io) << "the temporary directory's file system refused O_DIRECT";
  constexpr int kPages = 300;  // far more than the queue depth of 16: the backlog is exercised
  std::vector<std::vector<std::byte>> pages;
  std::vector<L3Ticket> tickets;
  uint64_t total = 0;
  for (int i = 0; i < kPages; ++i) {
    const size_t length = 1 + (static_cast<size_t>(i) * 2731) % (3 * 4096);  // 1 B .. 3 slots
    pages.push_back(page_bytes(i, length));
    total += length;
    tickets.push_back(store.submit_write(i, pages.back()));
  }
  EXPECT_GT(store.in_flight(), 0u);
  for (L3Ticket t : tickets) ASSERT_EQ(store.wait(t, kWait).status, L3Status::kOk);

  std::vector<std::vector<std::byte>> back(kPages);
  tickets.clear();
  for (int i = 0; i < kPages; ++i) {
    back[i].assign(pages[i].size(), std::byte{0});
    if (i % 2 == 0) {
      tickets.push_back(store.submit_read(i, back[i]));
    } else {  // scattered into two pieces
      std::span<std::byte> all(back[i]);
      const size_t half = all.size() / 2;
      tickets.push_back(store.submit_read(i, {all.first(half), all.subspan(half)}));
    }
  }
  size_t seen = 0;
  for (int round = 0; round < 10000 && seen < tickets.size(); ++round) {
    for (const auto& c : store.poll()) {
      EXPECT_EQ(c.status, L3Status::kOk) << "page " << c.key << ": " << to_string(c.status);
      EXPECT_FALSE(c.is_write);
      ++seen;
    }
    if (seen < tickets.size()) std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(seen, tickets.size());
  for (int i = 0; i < kPages; ++i) ASSERT_EQ(back[i], pages[i]) << "page " << i;

  const DiskStoreStats s = store.stats();
  EXPECT_EQ(s.pages_written, uint64_t{kPages});
  EXPECT_EQ(s.bytes_written, total);
  EXPECT_EQ(s.pages_read, uint64_t{kPages});
  EXPECT_EQ(s.bytes_read, total);
  EXPECT_EQ(s.pages_stored, uint64_t{kPages});
  EXPECT_EQ(store.read_latency().count(), uint64_t{kPages});
  EXPECT_EQ(store.read_queue_wait().count(), uint64_t{kPages}) << "each read's wait, once";
  EXPECT_GT(store.read_latency().quantile(0.99), 0u);
  EXPECT_EQ(s.checksum_failures + s.io_errors + s.no_space, 0u);
}

TEST_F(DiskStoreTest, ReadsBeyondTheStagingBoundWaitTheirTurnAndAllArrive) {
  for (const size_t bound : {size_t{1}, size_t{2 * 3 * 4096}}) {  // below one read; two reads
    SCOPED_TRACE(bound);
    TempDir dir;
    DiskStoreOptions o = options_for(dir.path);
    o.read_bytes_in_kernel = bound;
    DiskStore store(o);
    constexpr int kPages = 40;
    const size_t length = 3 * 4096 - 100;  // three slots each
    std::vector<std::vector<std::byte>> back(kPages, std::vector<std::byte>(length));
    for (int i = 0; i < kPages; ++i) {
      ASSERT_EQ(write_and_wait(store, i, page_bytes(i, length)).status, L3Status::kOk);
    }
    for (int i = 0; i < kPages; ++i) store.submit_read(i, back[i]);
    size_t seen = 0, most_staged = 0;
    for (int round = 0; round < 10000 && seen < kPages; ++round) {
      most_staged = std::max(most_staged, store.read_staging_in_use());
      for (const auto& c : store.poll(10ms)) {
        EXPECT_EQ(c.status, L3Status::kOk) << "page " << c.key;
        ++seen;
      }
    }
    ASSERT_EQ(seen, size_t{kPages});
    // The reads behind the bound waited, and that wait is told apart from the device's time.
    EXPECT_EQ(store.read_queue_wait().count(), size_t{kPages});
    EXPECT_GT(store.read_queue_wait().quantile(1.0), 0u);
    EXPECT_LE(most_staged, std::max(bound, size_t{3 * 4096}));
    EXPECT_GT(most_staged, 0u);
    EXPECT_EQ(store.read_staging_in_use(), 0u) << "every read's buffer is gone once it completed";
    for (int i = 0; i < kPages; ++i) EXPECT_EQ(back[i], page_bytes(i, length)) << "page " << i;
  }
}

// Finished transfers hand their staging buffers to the next ones of the same size (up to
// staging_keep_bytes), and what is read through a reused buffer is still exactly what was written.
TEST_F(DiskStoreTest, TransfersReuseStagingBuffersWithinTheBudget) {
  const size_t length = 40 * 4096 - 100;  // a mapped buffer (StagingBuffer::kMapThreshold)
  for (const size_t keep : {size_t{0}, size_t{2} << 20}) {
    SCOPED_TRACE(keep);
    TempDir dir;
    DiskStoreOptions o = options_for(dir.path);
    o.staging_keep_bytes = keep;
    DiskStore store(o);
    constexpr int kPages = 6;
    for (int i = 0; i < kPages; ++i) {
      ASSERT_EQ(write_and_wait(store, i, page_bytes(i, length)).status, L3Status::kOk);
    }
    for (int i = 0; i < kPages; ++i) {
      std::vector<std::byte> back(length);
      ASSERT_EQ(read_and_wait(store, i, back).status, L3Status::kOk);
      EXPECT_EQ(back, page_bytes(i, length)) << "page " << i;
    }
    // One buffer serves every transfer after the first, one at a time as they are here.
    EXPECT_EQ(store.stats().staging_reused, keep == 0 ? 0u : uint64_t{2 * kPages - 1});
  }
}

TEST_F(DiskStoreTest, AReadOvertakesABacklogOfWrites) {
  DiskStore store(options_for(dir_.path));  // queue depth 16
  const std::vector<std::byte> stored = page_bytes(1000, 4096);
  ASSERT_EQ(write_and_wait(store, 1000, stored).status, L3Status::kOk);
  constexpr int kWrites = 200;
  for (int i = 0; i < kWrites; ++i) store.submit_write(i, page_bytes(i, 4096));
  std::vector<std::byte> back(4096);
  const L3Ticket read = store.submit_read(1000, back);
  int writes_before_read = -1, writes = 0;
  for (int round = 0; round < 10000 && writes < kWrites; ++round) {
    for (const auto& c : store.poll(10ms)) {
      if (c.ticket == read) {
        EXPECT_EQ(c.status, L3Status::kOk);
        writes_before_read = writes;
      } else {
        ++writes;
      }
    }
  }
  ASSERT_EQ(writes, kWrites);
  ASSERT_GE(writes_before_read, 0) << "the read never completed";
  // In the ring at once (writes leave it a quarter free); the writes in it with it, and some
  // that follow them, may still complete first. Behind the backlog it would come ~200th.
  EXPECT_LE(writes_before_read, kWrites / 4) << "the read waited behind the write backlog";
  EXPECT_EQ(back, stored);
}

TEST_F(DiskStoreTest, BufferedModeRoundTrip) {
  DiskStoreOptions o = options_for(dir_.path);
  o.direct_io = false;
  DiskStore store(o);
  EXPECT_FALSE(store.stats().direct_io);
  const auto page = page_bytes(1, 5000);
  ASSERT_TRUE(write_and_wait(store, 1, page).ok());
  std::vector<std::byte> back(page.size());
  ASSERT_TRUE(read_and_wait(store, 1, back).ok());
  EXPECT_EQ(back, page);
}

TEST_F(DiskStoreTest, FlippedByteIsAChecksumFailureAndOtherPagesStayFine) {
  DiskStore store(options_for(dir_.path));
  std::vector<std::vector<std::byte>> pages;
  for (int i = 0; i < 8; ++i) {
    pages.push_back(page_bytes(i, 4096));
    ASSERT_TRUE(write_and_wait(store, i, pages.back()).ok());
  }
  const long at = find_in_file(store.data_path(), pages[3]);
  ASSERT_GE(at, 0);
  {
    std::fstream f(store.data_path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at + 1000);
    const char c = static_cast<char>(f.get());
    f.seekp(at + 1000);
    f.put(static_cast<char>(c ^ 0x01));
  }
  std::vector<std::byte> back(4096, std::byte{0x77});
  EXPECT_EQ(read_and_wait(store, 3, back).status, L3Status::kChecksumMismatch);
  EXPECT_EQ(back, std::vector<std::byte>(4096, std::byte{0x77}))
      << "bad bytes must not be handed out";
  EXPECT_FALSE(store.contains(3)) << "a page that failed its checksum is dropped";
  EXPECT_EQ(read_and_wait(store, 3, back).status, L3Status::kNotFound);
  for (int i = 0; i < 8; ++i) {
    if (i == 3) continue;
    ASSERT_TRUE(read_and_wait(store, i, back).ok()) << i;
    EXPECT_EQ(back, pages[i]) << i;
  }
  EXPECT_EQ(store.stats().checksum_failures, 1u);
  EXPECT_TRUE(has_warning(store, "fails its checksum"));
}

// A destination that O_DIRECT can fill in place: a StagingBuffer is 4096-aligned.
std::span<std::byte> part(const StagingBuffer& buffer, size_t from, size_t n) {
  return {buffer.data() + from, n};
}

// A read whose trailing destination pieces the caller lets be read in place and that are
// 4096-aligned (in memory, in size and in the page) lands in them in place: only the leading
// pieces are staged, and the bytes are exact. Without that leave, aligned pieces are staged too.
TEST_F(DiskStoreTest, AlignedDestinationsAreReadInPlaceWithOnlyTheHeadStaged) {
  DiskStore store(options_for(dir_.path));
  ASSERT_TRUE(store.stats().direct_io);
  const size_t tail = 3 * 8192;
  struct Case {
    const char* name;
    size_t head;           // bytes of a leading piece, in a std::vector (0: none)
    size_t in_place_from;  // submit_read's argument
    size_t staged;         // expected staging while the read is in the ring
  };
  L3Key key = 0;
  for (const Case c : {Case{"no head", 0, 0, 0}, Case{"a 4096-byte head", 4096, 1, 4096},
                       Case{"a 100-byte head: all staged", 100, 1, 7 * 4096},
                       Case{"not let in place: all staged", 0, SIZE_MAX, 6 * 4096}}) {
    SCOPED_TRACE(c.name);
    ++key;
    const std::vector<std::byte> page = page_bytes(key, c.head + tail);
    ASSERT_TRUE(write_and_wait(store, key, page).ok());
    std::vector<std::byte> head(c.head, std::byte{0x55});
    const StagingBuffer body(tail);
    std::vector<std::span<std::byte>> pieces;
    if (c.head) pieces.emplace_back(head);
    for (size_t at = 0; at < tail; at += 8192) pieces.push_back(part(body, at, 8192));
    const L3Ticket ticket = store.submit_read(key, pieces, c.in_place_from);
    EXPECT_EQ(store.read_staging_in_use(), c.staged);
    ASSERT_EQ(store.wait(ticket, kWait).status, L3Status::kOk);
    EXPECT_TRUE(std::equal(head.begin(), head.end(), page.begin()));
    EXPECT_EQ(0, std::memcmp(body.data(), page.data() + c.head, tail));
    EXPECT_EQ(store.read_staging_in_use(), 0u);
  }
}

// A write's trailing 4096-aligned pieces, when the caller lets it, are gathered by the kernel
// from where they lie: only the pieces before them are copied, and the page reads back
// byte-exact under its checksum. Pieces not let in place, or after an odd-sized head, are copied.
TEST_F(DiskStoreTest, AlignedSourcesAreWrittenInPlaceWithOnlyTheHeadCopied) {
  DiskStore store(options_for(dir_.path));
  ASSERT_TRUE(store.stats().direct_io);
  const size_t tail = 3 * 8192;
  struct Case {
    const char* name;
    size_t head;           // bytes of a leading piece, in a std::vector (0: none)
    size_t in_place_from;  // submit_write's argument
    size_t copied;         // expected bytes copied at submission
  };
  L3Key key = 0;
  for (const Case c : {Case{"no head", 0, 0, 0}, Case{"a 4096-byte head", 4096, 1, 4096},
                       Case{"a 100-byte head: all copied", 100, 1, 100 + tail},
                       Case{"not let in place: all copied", 0, SIZE_MAX, tail}}) {
    SCOPED_TRACE(c.name);
    ++key;
    const std::vector<std::byte> page = page_bytes(key, c.head + tail);
    StagingBuffer body(tail);
    std::memcpy(body.data(), page.data() + c.head, tail);
    std::vector<std::span<const std::byte>> pieces;
    if (c.head) pieces.emplace_back(page.data(), c.head);
    for (size_t at = 0; at < tail; at += 8192) pieces.push_back(part(body, at, 8192));
    EXPECT_EQ(DiskStore::first_in_place(pieces, c.in_place_from) < pieces.size(),
              c.copied == c.head);
    const uint64_t before = store.stats().bytes_copied;
    const L3Ticket ticket = store.submit_write(key, pieces, c.in_place_from);
    EXPECT_EQ(store.stats().bytes_copied - before, c.copied);
    ASSERT_EQ(store.wait(ticket, kWait).status, L3Status::kOk);
    std::vector<std::byte> back(page.size());
    ASSERT_EQ(read_and_wait(store, key, back).status, L3Status::kOk);
    EXPECT_EQ(back, page);
  }
}

// Reads in place take no staging memory but still enter the kernel within read_bytes_in_kernel,
// so that a restore's reads are not spread among those of the restores queued behind it.
TEST_F(DiskStoreTest, ReadsInPlaceAlsoWaitForTheBoundAndAllArrive) {
  DiskStoreOptions o = options_for(dir_.path);
  o.read_bytes_in_kernel = 2 * 3 * 4096;  // two reads
  DiskStore store(o);
  constexpr int kPages = 40;
  const size_t length = 3 * 4096;
  const StagingBuffer back(kPages * length);
  for (int i = 0; i < kPages; ++i) {
    ASSERT_EQ(write_and_wait(store, i, page_bytes(i, length)).status, L3Status::kOk);
  }
  for (int i = 0; i < kPages; ++i) store.submit_read(i, {part(back, i * length, length)}, 0);
  size_t seen = 0, most_in_kernel = 0;
  for (int round = 0; round < 10000 && seen < kPages; ++round) {
    most_in_kernel = std::max(most_in_kernel, store.read_bytes_in_kernel());
    EXPECT_EQ(store.read_staging_in_use(), 0u);
    for (const auto& c : store.poll(10ms)) {
      EXPECT_EQ(c.status, L3Status::kOk) << "page " << c.key;
      ++seen;
    }
  }
  ASSERT_EQ(seen, size_t{kPages});
  EXPECT_EQ(most_in_kernel, o.read_bytes_in_kernel);
  EXPECT_GT(store.read_queue_wait().quantile(1.0), 0u) << "the reads behind the bound waited";
  EXPECT_EQ(store.read_bytes_in_kernel(), 0u);
  for (int i = 0; i < kPages; ++i) {
    EXPECT_EQ(0, std::memcmp(back.data() + i * length, page_bytes(i, length).data(), length)) << i;
  }
}

// A page read in place is checked like a staged one: a flipped byte is a checksum failure, the
// page is dropped, and the staged head is not written.
TEST_F(DiskStoreTest, AFlippedByteInAPageReadInPlaceIsAChecksumFailure) {
  DiskStore store(options_for(dir_.path));
  const std::vector<std::byte> page = page_bytes(9, 4 * 4096);
  ASSERT_TRUE(write_and_wait(store, 9, page).ok());
  const long at = find_in_file(store.data_path(), page);
  ASSERT_GE(at, 0);
  {
    std::fstream f(store.data_path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at + 3 * 4096 + 7);
    const char c = static_cast<char>(f.get());
    f.seekp(at + 3 * 4096 + 7);
    f.put(static_cast<char>(c ^ 0x10));
  }
  std::vector<std::byte> head(4096, std::byte{0x77});
  const StagingBuffer body(3 * 4096);
  const std::vector<std::span<std::byte>> pieces = {head, part(body, 0, 3 * 4096)};
  EXPECT_EQ(store.wait(store.submit_read(9, pieces, 1), kWait).status, L3Status::kChecksumMismatch);
  EXPECT_EQ(head, std::vector<std::byte>(4096, std::byte{0x77}));
  EXPECT_FALSE(store.contains(9));
  EXPECT_EQ(store.stats().checksum_failures, 1u);
}

TEST_F(DiskStoreTest, DataFileDeletedBetweenRunsGivesCleanMisses) {
  const auto page = page_bytes(5, 9000);
  {
    DiskStoreOptions o = options_for(dir_.path);
    o.sync_interval = std::chrono::hours(1);  // not noticed while in use (see the test below)
    DiskStore store(o);
    ASSERT_TRUE(write_and_wait(store, 5, page).ok());
    fs::remove(store.data_path());  // an open file lives on until close: this run still reads it
    std::vector<std::byte> back(page.size());
    EXPECT_TRUE(read_and_wait(store, 5, back).ok());
  }
  DiskStore store(options_for(dir_.path));
  EXPECT_FALSE(store.contains(5));
  EXPECT_EQ(store.stats().pages_dropped_at_start, 1u);
  EXPECT_TRUE(has_warning(store, "pages dropped"));
  std::vector<std::byte> back(page.size());
  EXPECT_EQ(read_and_wait(store, 5, back).status, L3Status::kNotFound);
  EXPECT_TRUE(write_and_wait(store, 6, page).ok()) << "the store keeps working";
}

TEST_F(DiskStoreTest, DataFileTruncatedUnderARunningStoreIsAnIoError) {
  DiskStore store(options_for(dir_.path));
  const auto page = page_bytes(1, 4096);
  ASSERT_TRUE(write_and_wait(store, 1, page).ok());
  fs::resize_file(store.data_path(), 0);
  std::vector<std::byte> back(page.size());
  const L3Completion c = read_and_wait(store, 1, back);
  EXPECT_EQ(c.status, L3Status::kIoError);
  EXPECT_EQ(store.stats().io_errors, 1u);
}

TEST_F(DiskStoreTest, RestartFindsThePages) {
  std::vector<std::vector<std::byte>> pages;
  {
    DiskStore store(options_for(dir_.path));
    for (int i = 0; i < 20; ++i) {
      pages.push_back(page_bytes(100 + i, 1000 + i * 700));
      store.submit_write(100 + i, pages.back());
    }
    // The destructor waits for the writes and saves the index.
  }
  DiskStore store(options_for(dir_.path));
  EXPECT_TRUE(store.stats().index_loaded);
  EXPECT_TRUE(store.warnings().empty());
  ASSERT_EQ(store.keys().size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(store.stored_length(100 + i), pages[i].size());
    std::vector<std::byte> back(pages[i].size());
    ASSERT_TRUE(read_and_wait(store, 100 + i, back).ok()) << i;
    EXPECT_EQ(back, pages[i]);
  }
  // New pages do not land on the restored ones.
  const auto extra = page_bytes(999, 4096);
  ASSERT_TRUE(write_and_wait(store, 999, extra).ok());
  std::vector<std::byte> back(pages[0].size());
  ASSERT_TRUE(read_and_wait(store, 100, back).ok());
  EXPECT_EQ(back, pages[0]);
}

TEST_F(DiskStoreTest, CorruptOrForeignIndexStartsEmptyWithAWarning) {
  {
    DiskStore store(options_for(dir_.path));
    ASSERT_TRUE(write_and_wait(store, 1, page_bytes(1, 4096)).ok());
  }
  const std::string index = dir_.path + "/k25-l3.index";
  {
    std::fstream f(index, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);  // in the header's content tag
    f.put('\x7F');
  }
  DiskStoreOptions o = options_for(dir_.path);
  {
    DiskStore store(o);
    EXPECT_FALSE(store.stats().index_loaded);
    EXPECT_EQ(store.keys().size(), 0u);
    EXPECT_TRUE(has_warning(store, "header checksum mismatch"));
    ASSERT_TRUE(write_and_wait(store, 2, page_bytes(2, 100)).ok());
  }
  {
    DiskStoreOptions other = o;
    other.content_tag = 1234;  // another model: its KV must not be reused
    DiskStore store(other);
    EXPECT_FALSE(store.contains(2));
    EXPECT_TRUE(has_warning(store, "content tag"));
  }
  fs::remove(index);
  DiskStore store(o);
  EXPECT_TRUE(has_warning(store, "index missing"));
  EXPECT_EQ(store.keys().size(), 0u);
}

// A child process writes pages, reports each acknowledged one (kOk from wait()) through a pipe,
// starts more writes and is killed with SIGKILL: no destructor, no index saved at close.
TEST_F(DiskStoreTest, AfterSigkillEveryAcknowledgedPageIsServed) {
  constexpr int kAcked = 40, kInFlight = 20;
  const auto page = [](int i) { return page_bytes(i, 1000 + 97 * static_cast<size_t>(i)); };
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::alarm(60);
    DiskStoreOptions o = options_for(dir_.path);
    o.sync_interval = std::chrono::hours(1);  // no fdatasync and no compaction before the kill
    auto* store = new DiskStore(o);           // never destroyed
    for (int i = 0; i < kAcked; ++i) {
      const auto bytes = page(i);
      if (!store->wait(store->submit_write(i, bytes), kWait).ok()) std::_Exit(2);
      if (::write(pipe_fds[1], &i, sizeof(i)) != sizeof(i)) std::_Exit(3);
      if (i % 4 == 3) {  // reads in between append records of their own (LRU touches)
        std::vector<std::byte> back(page(i - 1).size());
        if (!store->wait(store->submit_read(i - 1, back), kWait).ok()) std::_Exit(4);
      }
    }
    for (int i = kAcked; i < kAcked + kInFlight; ++i) store->submit_write(i, page(i));
    ::raise(SIGKILL);
  }
  ::close(pipe_fds[1]);
  std::vector<int> acked;
  int i = 0;
  while (::read(pipe_fds[0], &i, sizeof(i)) == sizeof(i)) acked.push_back(i);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(acked.size(), size_t{kAcked});

  DiskStore store(options_for(dir_.path));
  EXPECT_TRUE(store.stats().index_loaded);
  EXPECT_GE(store.stats().journal_records_replayed, uint64_t{kAcked});
  for (int key : acked) {
    ASSERT_TRUE(store.contains(key)) << "acknowledged page " << key << " lost";
    std::vector<std::byte> back(page(key).size());
    ASSERT_TRUE(read_and_wait(store, key, back).ok()) << key;
    EXPECT_EQ(back, page(key)) << key;
  }
  // Writes not acknowledged may or may not have made it, but never with other bytes.
  for (int key = kAcked; key < kAcked + kInFlight; ++key) {
    if (!store.contains(key)) continue;
    std::vector<std::byte> back(page(key).size());
    ASSERT_TRUE(read_and_wait(store, key, back).ok()) << key;
    EXPECT_EQ(back, page(key)) << key;
  }
}

TEST_F(DiskStoreTest, ATornJournalTailIsIgnoredAndCounted) {
  DiskStoreOptions o = options_for(dir_.path);
  o.persist_on_close = false;  // the journal stays as appended, not compacted
  {
    DiskStore store(o);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(write_and_wait(store, i, page_bytes(i, 4096)).ok());
  }
  const std::string index = dir_.path + "/k25-l3.index";
  fs::resize_file(index, fs::file_size(index) - 1);  // the last record torn, as by a crash
  DiskStore store(o);
  EXPECT_EQ(store.keys(), (std::vector<L3Key>{0, 1}));
  EXPECT_EQ(store.stats().journal_bytes_ignored, L3Journal::kRecordBytes - 1);
  EXPECT_TRUE(has_warning(store, "is torn"));
  EXPECT_EQ(write_and_wait(store, 2, page_bytes(2, 4096)).status, L3Status::kOk);
}

TEST_F(DiskStoreTest, LeastRecentlyUsedOrderSurvivesARestart) {
  for (const bool compacted : {false, true}) {
    SCOPED_TRACE(compacted ? "journal compacted at close" : "journal as appended");
    TempDir dir;
    DiskStoreOptions o = options_for(dir.path);
    o.persist_on_close = compacted;
    {
      DiskStore store(o);
      for (L3Key key = 1; key <= 4; ++key)
        ASSERT_TRUE(write_and_wait(store, key, page_bytes(key, 4096)).ok());
      std::vector<std::byte> back(4096);
      ASSERT_TRUE(read_and_wait(store, 1, back).ok());  // a read uses the page
      ASSERT_TRUE(read_and_wait(store, 3, back).ok());
      ASSERT_TRUE(write_and_wait(store, 2, page_bytes(2, 4096)).ok());  // written again: once
      EXPECT_EQ(store.keys_by_recency(), (std::vector<L3Key>{4, 1, 3, 2}));
    }
    DiskStore store(o);
    EXPECT_EQ(store.keys_by_recency(), (std::vector<L3Key>{4, 1, 3, 2}));
    EXPECT_EQ(store.least_recently_used(), 4u);
  }
}

TEST_F(DiskStoreTest, ADataFileDeletedWhileInUseIsNoticedAndReplaced) {
  DiskStoreOptions o = options_for(dir_.path);
  o.sync_interval = std::chrono::milliseconds(0);  // checked at the end of every batch
  {
    DiskStore store(o);
    ASSERT_TRUE(write_and_wait(store, 1, page_bytes(1, 4096)).ok());
    fs::remove(store.data_path());
    EXPECT_TRUE(store.poll().empty());
    EXPECT_EQ(store.stats().data_file_lost, 1u);
    EXPECT_TRUE(has_warning(store, "deleted or replaced while in use"));
    EXPECT_FALSE(store.contains(1)) << "its pages went with it";
    EXPECT_TRUE(fs::exists(store.data_path())) << "a new data file, so the disk space is freed";
    ASSERT_TRUE(write_and_wait(store, 2, page_bytes(2, 4096)).ok());
  }
  DiskStore store(o);
  EXPECT_EQ(store.keys(), std::vector<L3Key>{2});
  std::vector<std::byte> back(4096);
  ASSERT_TRUE(read_and_wait(store, 2, back).ok());
  EXPECT_EQ(back, page_bytes(2, 4096));
}

TEST_F(DiskStoreTest, AnIndexDeletedWhileInUseIsWrittenAnew) {
  DiskStoreOptions o = options_for(dir_.path);
  o.sync_interval = std::chrono::milliseconds(0);
  o.persist_on_close = false;
  const std::string index = dir_.path + "/k25-l3.index";
  {
    DiskStore store(o);
    ASSERT_TRUE(write_and_wait(store, 1, page_bytes(1, 4096)).ok());
    fs::remove(index);
    EXPECT_TRUE(store.poll().empty());
    EXPECT_EQ(store.stats().index_lost, 1u);
    EXPECT_TRUE(fs::exists(index));
    ASSERT_TRUE(write_and_wait(store, 2, page_bytes(2, 4096)).ok());
  }
  DiskStore store(o);
  EXPECT_EQ(store.keys(), (std::vector<L3Key>{1, 2}));
}

TEST_F(DiskStoreTest, CapacityUsedUpIsNoSpaceUntilAPageIsErased) {
  DiskStoreOptions o = options_for(dir_.path);
  o.capacity_bytes = 4 * 4096;
  DiskStore store(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(write_and_wait(store, i, page_bytes(i, 4096)).ok());
  EXPECT_EQ(write_and_wait(store, 9, page_bytes(9, 4096)).status, L3Status::kNoSpace);
  EXPECT_EQ(store.stats().no_space, 1u);
  EXPECT_TRUE(store.erase(2));
  EXPECT_FALSE(store.erase(2));
  EXPECT_TRUE(write_and_wait(store, 9, page_bytes(9, 4096)).ok());
  EXPECT_EQ(store.stats().slots_used, 4u);
}

TEST_F(DiskStoreTest, OverwriteReplacesAndFreesTheOldSlots) {
  DiskStore store(options_for(dir_.path));
  ASSERT_TRUE(write_and_wait(store, 1, page_bytes(1, 8192)).ok());
  const auto second = page_bytes(2, 4096);
  ASSERT_TRUE(write_and_wait(store, 1, second).ok());
  EXPECT_EQ(store.stats().slots_used, 1u);
  std::vector<std::byte> back(4096);
  ASSERT_TRUE(read_and_wait(store, 1, back).ok());
  EXPECT_EQ(back, second);
  std::vector<std::byte> wrong(8192);
  EXPECT_EQ(read_and_wait(store, 1, wrong).status, L3Status::kLengthMismatch);
}

TEST_F(DiskStoreTest, SlotsOfAPageBeingReadAreNotReusedUntilTheReadCompletes) {
  DiskStoreOptions o = options_for(dir_.path);
  o.capacity_bytes = 2 * 4096;
  DiskStore store(o);
  const auto page = page_bytes(1, 4096);
  ASSERT_TRUE(write_and_wait(store, 1, page).ok());
  std::vector<std::byte> back(4096);
  const L3Ticket read = store.submit_read(1, back);  // not reaped yet: its slot stays pinned
  EXPECT_TRUE(store.erase(1));
  // Slots are allocated at submission, and submitting reaps nothing, so the read is still pinned.
  const auto two = page_bytes(2, 4096), three = page_bytes(3, 4096);
  const L3Ticket write2 = store.submit_write(2, two);  // takes the other slot
  EXPECT_EQ(store.wait(store.submit_write(3, three), kWait).status, L3Status::kNoSpace);
  ASSERT_TRUE(store.wait(read, kWait).ok());
  EXPECT_EQ(back, page);
  ASSERT_TRUE(store.wait(write2, kWait).ok());
  EXPECT_TRUE(write_and_wait(store, 3, page_bytes(3, 4096)).ok()) << "released after the read";
}

TEST_F(DiskStoreTest, TicketsAreReturnedOnce) {
  DiskStore store(options_for(dir_.path));
  const L3Ticket t = store.submit_write(1, page_bytes(1, 10));
  EXPECT_TRUE(store.wait(t, kWait).ok());
  EXPECT_EQ(store.wait(t, kWait).status, L3Status::kUnknownTicket);
  EXPECT_EQ(store.wait(123456, 1ms).status, L3Status::kUnknownTicket);
  EXPECT_EQ(store.wait(store.submit_write(2, std::span<const std::byte>{}), kWait).status,
            L3Status::kLengthMismatch);
  std::vector<std::byte> back(10);
  EXPECT_EQ(read_and_wait(store, 77, back).status, L3Status::kNotFound);
  EXPECT_EQ(store.stats().not_found, 1u);
  EXPECT_TRUE(store.drain(kWait));
  EXPECT_TRUE(store.poll().empty());
}

TEST_F(DiskStoreTest, RejectsBadOptions) {
  DiskStoreOptions o = options_for(dir_.path);
  o.page_size = 1000;
  EXPECT_THROW(DiskStore{o}, Error);
  o = options_for(dir_.path);
  o.capacity_bytes = 100;
  EXPECT_THROW(DiskStore{o}, Error);
  o = options_for(dir_.path + "/no/such/dir/file");
  EXPECT_THROW(DiskStore{o}, Error);
  o = options_for(dir_.path);
  o.read_bytes_in_kernel = 0;
  EXPECT_THROW(DiskStore{o}, Error);
  o = options_for(dir_.path);
  o.raw_device = true;
  EXPECT_THROW(DiskStore{o}, Error) << "a directory is not a block device";
  for (const char* dev : {"/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"}) {
    struct stat st {};
    if (::stat(dev, &st) != 0 || !S_ISBLK(st.st_mode)) continue;
    o = options_for(dev);  // refused before anything is opened
    EXPECT_THROW(DiskStore{o}, Error) << dev << " without raw_device";
    break;
  }
}

TEST_F(DiskStoreTest, L2PagesSpillAndRestoreByteExact) {
  // Blocks of 2 KiB (staged reads), and of 4 KiB (read in place).
  for (const int kv_dim : {32, 64}) {
    SCOPED_TRACE(kv_dim);
    TempDir dir;
    check_l2_round_trip(dir.path, kv_dim);
  }
}

void DiskStoreTest::check_l2_round_trip(const std::string& dir, int kv_dim) {
  PagePool pool(PageGeometry{16, 5, kv_dim}, 8 << 20);
  DiskStore store(options_for(dir));
  std::vector<PageId> pages;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  const size_t block_floats = 16 * static_cast<size_t>(kv_dim);
  for (int i = 0; i < 12; ++i) {
    pages.push_back(*pool.allocate());
    for (int l = 0; l < 5; ++l)
      for (size_t j = 0; j < block_floats; ++j) {
        pool.keys(pages.back(), l)[j] = dist(rng);
        pool.values(pages.back(), l)[j] = dist(rng);
      }
  }
  std::vector<std::vector<float>> expected;
  for (PageId p : pages) {
    std::vector<float> flat;
    for (int l = 0; l < 5; ++l) {
      flat.insert(flat.end(), pool.keys(p, l), pool.keys(p, l) + block_floats);
      flat.insert(flat.end(), pool.values(p, l), pool.values(p, l) + block_floats);
    }
    expected.push_back(std::move(flat));
  }
  std::vector<L3Ticket> tickets;
  for (size_t i = 0; i < pages.size(); ++i)
    tickets.push_back(store.submit_write(i, l2_page_const_spans(pool, pages[i])));
  for (L3Ticket t : tickets) ASSERT_TRUE(store.wait(t, kWait).ok());
  EXPECT_EQ(store.stored_length(0), l2_page_payload_bytes(pool.geometry()));
  for (PageId p : pages)  // scribble over L2 as a reuse would
    for (int l = 0; l < 5; ++l) std::fill_n(pool.keys(p, l), block_floats, 9.0f);
  tickets.clear();
  const uint64_t reused = store.stats().staging_reused;
  for (size_t i = 0; i < pages.size(); ++i)
    tickets.push_back(store.submit_read(i, l2_page_spans(pool, pages[i]), 0));
  const bool in_place = block_floats * sizeof(float) % 4096 == 0;
  EXPECT_EQ(store.read_staging_in_use() == 0, in_place);
  for (L3Ticket t : tickets) ASSERT_TRUE(store.wait(t, kWait).ok());
  if (in_place) {
    EXPECT_EQ(store.stats().staging_reused, reused) << "no staging buffer at all";
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    size_t at = 0;
    for (int l = 0; l < 5; ++l) {
      ASSERT_EQ(0, std::memcmp(pool.keys(pages[i], l), &expected[i][at], block_floats * 4));
      at += block_floats;
      ASSERT_EQ(0, std::memcmp(pool.values(pages[i], l), &expected[i][at], block_floats * 4));
      at += block_floats;
    }
  }
}

// Runs in a forked child so that the mount namespace or the file size limit stays there.
// Returns 0 when the store reported kNoSpace cleanly and kept every page it had accepted.
int fill_until_no_space(const std::string& dir) {
  DiskStoreOptions o = options_for(dir);
  o.persist_on_close = false;
  DiskStore store(o);
  std::vector<std::vector<std::byte>> written;
  bool saw_no_space = false;
  for (int i = 0; i < 64 && !saw_no_space; ++i) {
    auto page = page_bytes(i, 3 * 4096 - 5);  // three slots: a short write can happen
    const L3Completion c = store.wait(store.submit_write(i, page), kWait);
    if (c.status == L3Status::kNoSpace) {
      saw_no_space = true;
    } else if (c.ok()) {
      written.push_back(std::move(page));
    } else {
      std::fprintf(stderr, "write %d: %s (%s)\n", i, to_string(c.status), std::strerror(c.error));
      return 2;
    }
  }
  if (!saw_no_space || written.empty()) return 3;
  if (store.stats().no_space != 1 || store.contains(written.size())) return 4;
  for (size_t i = 0; i < written.size(); ++i) {
    std::vector<std::byte> back(written[i].size());
    if (!store.wait(store.submit_read(i, back), kWait).ok() || back != written[i]) return 5;
  }
  return 0;
}

constexpr int kChildCannotMount = 77;

void write_proc_file(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (::write(fd, text.data(), text.size()) < 0) {
    // The mount below fails and says so.
  }
  ::close(fd);
}

// In a forked (single-threaded) child: a tmpfs of `size` at `dir` in a private mount namespace,
// gone with the child. As root directly; otherwise through a user namespace, as `unshare -rm`
// does. False when the system allows neither.
bool mount_private_tmpfs(const std::string& dir, const std::string& size) {
  if (::unshare(CLONE_NEWNS) != 0) {
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    write_proc_file("/proc/self/setgroups", "deny");
    write_proc_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
    write_proc_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
  }
  return ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
         ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

// Forks a child that fills a 64 KiB space until the store reports kNoSpace: a tmpfs mounted in a
// private mount namespace (gone with the child; needs CAP_SYS_ADMIN), or a 64 KiB file size limit
// (EFBIG) on the real file system. Returns the child's wait status.
int run_full_disk_child(const std::string& dir, bool tmpfs) {
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork failed: ", std::strerror(errno));
  if (pid == 0) {
    ::alarm(60);  // the child can never hang the test
    if (tmpfs) {
      if (!mount_private_tmpfs(dir, "64k")) std::_Exit(kChildCannotMount);
    } else {
      std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
      const rlimit limit{64 * 1024, 64 * 1024};
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) std::_Exit(8);
    }
    int rc = 9;
    try {
      rc = fill_until_no_space(dir);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    std::_Exit(rc);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) fail("waitpid failed: ", std::strerror(errno));
  return status;
}

TEST_F(DiskStoreTest, FullTmpfsIsNoSpaceNotACrash) {
  const std::string small = dir_.path + "/small";
  fs::create_directory(small);
  const int status = run_full_disk_child(small, /*tmpfs=*/true);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  ASSERT_NE(WEXITSTATUS(status), kChildCannotMount)
      << "cannot mount a tmpfs in a private mount namespace (neither root nor user namespaces "
         "allowed): the ENOSPC path is untested";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's stderr above";
}

// Runs in a forked child whose index lies on a 4 KiB tmpfs (the data file on the real disk):
// once the journal cannot take another record, writes complete with kNoSpace, and every write
// acknowledged before is still found after a restart. 0 on success.
int fill_journal_until_no_space(const std::string& dir, const std::string& index_dir) {
  DiskStoreOptions o = options_for(dir);
  o.index_path = index_dir + "/k25-l3.index";
  o.persist_on_close = false;
  std::vector<std::vector<std::byte>> acked;
  {
    DiskStore store(o);
    for (int i = 0; i < 1000; ++i) {
      auto page = page_bytes(i, 100);
      const L3Completion c = store.wait(store.submit_write(i, page), kWait);
      if (c.status == L3Status::kNoSpace) break;
      if (!c.ok()) {
        std::fprintf(stderr, "write %d: %s (%s)\n", i, to_string(c.status), std::strerror(c.error));
        return 2;
      }
      acked.push_back(std::move(page));
    }
    if (acked.empty() || acked.size() == 1000) return 3;
    if (store.stats().journal_errors == 0 || store.contains(acked.size())) return 4;
    for (size_t i = 0; i < acked.size(); ++i) {
      std::vector<std::byte> back(100);
      if (!store.wait(store.submit_read(i, back), kWait).ok() || back != acked[i]) return 5;
    }
  }
  DiskStore store(o);
  for (size_t i = 0; i < acked.size(); ++i) {
    if (!store.contains(i)) return 6;
  }
  return 0;
}

TEST_F(DiskStoreTest, AFullIndexFileSystemFailsWritesCleanlyAndKeepsTheAcknowledgedOnes) {
  const std::string small = dir_.path + "/index";
  fs::create_directory(small);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::alarm(60);
    if (!mount_private_tmpfs(small, "4k")) std::_Exit(kChildCannotMount);
    int rc = 9;
    try {
      rc = fill_journal_until_no_space(dir_.path, small);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    std::_Exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  ASSERT_NE(WEXITSTATUS(status), kChildCannotMount) << "cannot mount a tmpfs here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's stderr above";
}

TEST_F(DiskStoreTest, FileSizeLimitIsNoSpaceNotACrash) {
  const int status = run_full_disk_child(dir_.path, /*tmpfs=*/false);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the child's stderr above";
}

}  // namespace
}  // namespace k25
