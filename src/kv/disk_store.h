// The L3 KV tier (SPEC §4, R-KV2/R-KV5/R-KV6): pages stored in fixed-size, 4096-aligned slots of
// one data file (or, when explicitly configured, a raw block device), read and written
// asynchronously through io_uring with O_DIRECT, found through an in-memory page table
// (L3PageTable) whose every change is appended to a journal (L3Journal, the index file) and
// replayed at start.
//
// Acknowledged: a write is acknowledged when poll() or wait() returns kOk for it. By then its
// bytes are in the data file (on the device with O_DIRECT) and its journal record has been
// written, so a restart after the process is killed at any point (SIGKILL, abort) serves every
// acknowledged page that was not erased or evicted since. Against power loss the data file and
// then the journal are fdatasynced every sync_interval and at close: at most that much is lost
// (a record whose page did not reach the platter fails its checksum and is dropped on read).
// When the journal cannot be written (disk full, I/O error) the writes of that batch complete
// with kNoSpace or kIoError instead, and the store rewrites the journal once it can.
//
// Eviction order: least recently used (a completed write or a successful read uses a page),
// kept across restarts by the journal.
//
// A stored page is an opaque 64-bit key plus a byte string (e.g. one L2 page, gathered from its
// per-layer blocks); it occupies ceil(length / page_size) consecutive slots, written and read
// with one request. Each page carries a CRC-32C over its key and bytes, checked on every read.
//
// Every failure is a typed status on the completion, never an exception or a crash: the caller
// degrades to recomputation. Waits are bounded by a timeout.
//
// Lifetime of buffers: the pieces a transfer may use in place (`in_place_from`) are the kernel's
// buffers themselves when the trailing ones among them are 4096-aligned in address and size, at
// a 4096-aligned offset of the page (an L2 page's blocks); all other bytes go through a staging
// buffer (a 192 KiB page staged cost a memcpy, and, when no kept buffer fitted, a page fault per
// 4 KiB and a second copy of the page in memory until the transfer completed).
// submit_write() copies the staged pieces at once (the caller may reuse them); those written in
// place must stay valid and unchanged until its completion has been returned by poll() or wait()
// (or the store is destroyed). A write's staging buffer is kept or unmapped when it completes.
// submit_read() writes into the caller's destination spans, so they must stay valid until its
// completion has been returned likewise; a read's staging buffer exists only while the read is in
// the kernel (bounded by read_bytes_in_kernel). A read's staged pieces are filled only when the
// checksum matches; those read in place hold unspecified bytes unless the read completes with kOk.
// The caller chooses, so whether a destination can see bad bytes never depends on where its memory
// happens to lie.
//
// Not synchronised: one thread (the engine's step loop) calls everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/latency_histogram.h"
#include "kv/io_uring_file.h"
#include "kv/l3_journal.h"
#include "kv/l3_page_table.h"
#include "kv/staging_buffer.h"
#include "kv/staging_pool.h"

namespace k25 {

using L3Ticket = uint64_t;

struct DiskStoreOptions {
  // l3_device: a directory (the store keeps k25-l3.data and k25-l3.index in it), a regular file
  // (its index is <path>.index), or, only with raw_device, a block device (then index_path is
  // required; the device's contents are overwritten).
  std::string path;
  bool raw_device = false;
  std::string index_path;  // the journal; empty: next to the data file as above
  uint64_t capacity_bytes = uint64_t{1} << 30;  // the data file never grows past this
  uint32_t page_size = 4096;                    // l3_page_size: slot bytes, multiple of 4096
  unsigned queue_depth = 64;                    // requests in the kernel at once
  // Bytes of reads in the kernel at once (at least one read); reads beyond it wait their turn,
  // holding no memory. For staged reads it bounds their buffers, so a restore of many pages does
  // not double their size in RAM. Reads in place count their bytes too: with every read of
  // several restores in the ring at once, the device shared its time among them and the first
  // restore finished later (the first turns after a restart, docs/benchmarks.md, session 43).
  size_t read_bytes_in_kernel = size_t{8} << 20;
  // Bytes of finished transfers' buffers kept for the next ones (kv/staging_pool.h): with
  // read_bytes_in_kernel at most this, staged reads allocate nothing once the store has served
  // one. Memory the process keeps while idle.
  size_t staging_keep_bytes = size_t{8} << 20;
  bool direct_io = true;  // O_DIRECT (buffered when the FS refuses it)
  // Reserve capacity_bytes on disk at start (fallocate): writes then never extend the file,
  // which ext4 serialises for O_DIRECT (4 KiB writes: 6 MiB/s without, see docs/kv-cache.md),
  // and the space is known to be there. Not done for a raw device.
  bool preallocate = true;
  // Identifies what the pages mean (e.g. a hash of the model and KV geometry): an index written
  // with another tag is discarded at start, so a restart with another model never reuses KV.
  uint64_t content_tag = 0;
  bool persist_on_close = true;  // the destructor syncs the data and compacts the journal
  // How often the data file and the journal are fdatasynced (power-loss safety), and the files
  // checked for having been deleted under the store. Zero: after every batch of records.
  std::chrono::milliseconds sync_interval{1000};
};

enum class L3Status : uint8_t {
  kOk,
  kNotFound,          // no such key (never stored, erased, or dropped at start)
  kChecksumMismatch,  // the bytes read are not the ones written: dropped from the table
  kIoError,           // the device or file system failed (error = errno; ENOMEM: no staging
                      // buffer), or a read found the end of the file
  kNoSpace,           // ENOSPC / EFBIG / EDQUOT from the file system, or the capacity is used up
  kLengthMismatch,    // the read's destination size differs from the stored length
  kTimedOut,          // wait() gave up; the request is still in flight, wait again later
  kUnknownTicket,     // never issued, or its completion was already returned
};
const char* to_string(L3Status status);

struct L3Completion {
  L3Ticket ticket = 0;
  bool is_write = false;
  L3Key key = 0;
  L3Status status = L3Status::kOk;
  int error = 0;  // errno for kIoError / kNoSpace when the kernel gave one
  bool ok() const { return status == L3Status::kOk; }
};

struct DiskStoreStats {
  bool direct_io = false;  // false: buffered fallback (the FS refused O_DIRECT) or configured
  uint64_t slots_total = 0;
  uint64_t slots_used = 0;
  uint64_t pages_stored = 0;  // keys in the page table
  uint64_t pages_written = 0, bytes_written = 0;
  uint64_t pages_read = 0, bytes_read = 0;  // successful, checksum verified
  uint64_t staging_reused = 0;              // transfers staged in a kept buffer (no new memory)
  uint64_t bytes_copied = 0;  // between the caller's pieces and staging buffers (not in place)
  uint64_t not_found = 0;
  uint64_t checksum_failures = 0;
  uint64_t io_errors = 0;
  uint64_t no_space = 0;
  uint64_t pages_dropped_at_start = 0;  // index entries that pointed past the data file
  bool index_loaded = false;            // false: started empty
  uint64_t journal_records_replayed = 0;
  uint64_t journal_bytes_ignored = 0;  // a torn or corrupt tail found at start (not trusted)
  uint64_t journal_errors = 0;         // appends, syncs or rewrites of the journal that failed
  uint64_t journal_rewrites = 0;       // compactions (start, close, size, after an error)
  uint64_t data_file_lost = 0;         // times the data file was deleted or replaced under us
  uint64_t index_lost = 0;             // times the journal was (it is written anew)
};

class DiskStore {
 public:
  // Opens (creating when needed) the data file and loads the index. A missing or invalid index
  // starts the store empty with a warning. Throws k25::Error on bad options or a data file that
  // cannot be opened, IoUringUnavailable when io_uring cannot be set up.
  explicit DiskStore(DiskStoreOptions options);
  // Waits (bounded) for requests in flight, then saves the index when persist_on_close.
  ~DiskStore();
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  // Stores the concatenation of `pieces` under `key`, replacing any earlier page of that key once
  // the write has completed (until then reads see the old one). Zero bytes is kLengthMismatch.
  // pieces[in_place_from, end) may be written from in place (see above); by default none.
  L3Ticket submit_write(L3Key key, std::span<const std::span<const std::byte>> pieces,
                        size_t in_place_from = SIZE_MAX);
  L3Ticket submit_write(L3Key key, std::span<const std::byte> bytes);
  // Reads `key` into `pieces` (scattered in order); their total size must equal the stored length.
  // pieces[in_place_from, end) may be read into in place (see above); by default none.
  L3Ticket submit_read(L3Key key, std::vector<std::span<std::byte>> pieces,
                       size_t in_place_from = SIZE_MAX);
  L3Ticket submit_read(L3Key key, std::span<std::byte> bytes);
  // Of pieces[from, end), the first of the trailing pieces a transfer uses in place (see above);
  // pieces.size() when none.
  static size_t first_in_place(std::span<const std::span<const std::byte>> pieces, size_t from);

  // Completions that are ready; when there are none yet but requests are in flight, waits up to
  // `timeout` for the first (zero: never blocks). Each ticket's completion is returned once, by
  // poll() or wait(), whichever sees it first. Sorted by ticket.
  std::vector<L3Completion> poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Waits up to `timeout` for one ticket; kTimedOut leaves it in flight.
  L3Completion wait(L3Ticket ticket, std::chrono::milliseconds timeout);
  // Waits up to `timeout` until nothing is in flight (completions stay for poll()); false on
  // timeout.
  bool drain(std::chrono::milliseconds timeout);

  bool contains(L3Key key) const { return table_.find(key) != nullptr; }
  std::optional<uint64_t> stored_length(L3Key key) const;
  std::vector<L3Key> keys() const { return table_.keys(); }
  // Forgets a page, and any write of it still in flight (its slots are reused once no read of
  // them is in flight); false when there was neither.
  bool erase(L3Key key);
  // Least recently used first (the eviction order), and the first of them.
  std::vector<L3Key> keys_by_recency() const { return table_.keys_by_recency(); }
  std::optional<L3Key> least_recently_used() const { return table_.least_recently_used(); }
  // Makes the pages written so far durable against power loss: fdatasync of the data, then the
  // journal compacted atomically. Throws k25::Error on failure (the old journal stays valid).
  void persist();

  size_t in_flight() const { return ops_.size(); }
  // Bytes of the staging buffers of the reads in the kernel now (<= read_bytes_in_kernel, or one
  // read's when a single read is larger).
  size_t read_staging_in_use() const { return read_staging_; }
  // Bytes of the reads in the kernel now, staged or in place (<= read_bytes_in_kernel, or one
  // read's when a single read is larger).
  size_t read_bytes_in_kernel() const { return read_in_kernel_; }
  DiskStoreStats stats() const;
  // Of every read that reached the device: from when it entered the ring to its completion
  // (the device's time), and from its submission to when it entered the ring (the wait behind
  // other requests and the staging bound).
  const LatencyHistogram& read_latency() const { return read_latency_; }
  const LatencyHistogram& read_queue_wait() const { return read_queue_wait_; }
  // Warnings issued so far (also printed to stderr), oldest first, at most kMaxWarnings.
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::string& data_path() const { return data_path_; }
  const std::string& index_path() const { return index_path_; }

  static constexpr size_t kMaxWarnings = 64;

 private:
  struct Op;

  L3Ticket finish_now(L3Key key, bool is_write, L3Status status, int error = 0);
  void start(std::unique_ptr<Op> op);
  bool queue(Op& op);  // hands op's remaining bytes to the ring; false when the ring is full
  void pump();         // queue the backlogs, submit
  void pump_backlog(std::deque<L3Ticket>& backlog);
  std::deque<L3Ticket>& backlog_for(const Op& op);
  void collect(std::chrono::nanoseconds timeout);
  void complete(Op& op, int result);
  void finish(Op& op, L3Status status, int error);
  void release_extent(L3Extent extent);
  void set_vectors(Op& op);                // op.iov: its remaining bytes, for a transfer in place
  static uint32_t read_crc(const Op& op);  // of the bytes a completed read brought
  void warn(std::string message);
  // End of every collect(): appends the journal records of the batch (the writes completed in
  // it are acknowledged only then), syncs and checks the files when sync_interval has passed.
  void commit_journal();
  void rewrite_journal();  // compacts (or recreates) the journal; warns on failure
  void fail_unjournaled_writes(int error);
  void check_files();        // deleted data file or journal
  void replace_data_file();  // the data file was deleted: forget its pages, start a new one
  void preallocate_data_file();

  DiskStoreOptions options_;
  std::string data_path_, index_path_;
  std::unique_ptr<IoUringFile> file_;
  L3PageTable table_;
  L3Ticket next_ticket_ = 1;
  StagingPool staging_{options_.staging_keep_bytes};
  std::unordered_map<L3Ticket, std::unique_ptr<Op>> ops_;  // issued, not yet completed
  // Issued, waiting for ring space (or, for reads, staging room); reads go in first.
  std::deque<L3Ticket> read_backlog_, write_backlog_;
  size_t in_ring_ = 0;         // handed to the ring, not yet completed
  size_t unsubmitted_ = 0;     // queued in the ring, not yet submitted to the kernel
  size_t read_staging_ = 0;    // bytes of the staging buffers of reads in the ring
  size_t read_in_kernel_ = 0;  // bytes of the reads in the ring, counted against the bound
  unsigned writes_in_ring_ = 0;
  std::unordered_map<L3Ticket, L3Completion> done_;   // completed, not yet returned
  std::unordered_map<L3Key, L3Ticket> latest_write_;  // newest write in flight per key
  std::unordered_map<uint64_t, uint32_t> read_pins_;  // first slot -> reads in flight on it
  std::vector<L3Extent> deferred_release_;            // freed while a read was in flight
  std::unique_ptr<L3Journal> journal_;
  bool checking_files_ = false;  // check_files() drains the ring, which commits again
  // A write completed in this batch: acknowledged once its journal record is appended.
  struct Unjournaled {
    L3Ticket ticket;
    L3Key key;
    L3Entry entry;
  };
  std::vector<Unjournaled> unjournaled_;
  std::chrono::steady_clock::time_point next_sync_{}, next_rewrite_attempt_{};
  DiskStoreStats stats_;
  LatencyHistogram read_latency_, read_queue_wait_;
  std::vector<std::string> warnings_;
};

}  // namespace k25
