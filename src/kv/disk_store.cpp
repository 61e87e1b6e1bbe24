#include "kv/disk_store.h"

#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "core/crc32c.h"
#include "core/error.h"

namespace k25 {
namespace {

constexpr size_t kDirectAlignment = 4096;
constexpr auto kCloseDrainTimeout = std::chrono::seconds(10);
// The journal is compacted once it holds more than twice as many records as pages (and this).
constexpr uint64_t kCompactMinRecords = 4096;

uint64_t nanoseconds(std::chrono::steady_clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

uint32_t page_crc(L3Key key, const std::byte* data, size_t length) {
  // The key is mixed in so that a slot holding another page's (valid) bytes fails the check.
  return crc32c_extend(crc32c(&key, sizeof(key)), data, length);
}

bool direct_aligned(std::span<const std::byte> piece) {
  return reinterpret_cast<uintptr_t>(piece.data()) % kDirectAlignment == 0 &&
         piece.size() % kDirectAlignment == 0 && !piece.empty();
}

// The first of the trailing pieces, from `from` on, that a transfer can use directly: each
// 4096-aligned in memory and in size, starting at a 4096-aligned offset of the page. The pieces
// before it (a header, say) go through a staging buffer. pieces.size() when none can.
template <typename Pieces>
size_t first_in_place_of(const Pieces& pieces, size_t from) {
  size_t first = pieces.size();
  while (first > from && direct_aligned(pieces[first - 1])) --first;
  if (pieces.size() - first >= static_cast<size_t>(IOV_MAX)) return pieces.size();
  size_t head = 0;
  for (size_t i = 0; i < first; ++i) head += pieces[i].size();
  return head % kDirectAlignment == 0 ? first : pieces.size();
}

bool is_no_space(int error) {
  return error == ENOSPC || error == EFBIG || error == EDQUOT;
}

}  // namespace

const char* to_string(L3Status status) {
  switch (status) {
    case L3Status::kOk:
      return "ok";
    case L3Status::kNotFound:
      return "not found";
    case L3Status::kChecksumMismatch:
      return "checksum mismatch";
    case L3Status::kIoError:
      return "I/O error";
    case L3Status::kNoSpace:
      return "no space";
    case L3Status::kLengthMismatch:
      return "length mismatch";
    case L3Status::kTimedOut:
      return "timed out";
    case L3Status::kUnknownTicket:
      return "unknown ticket";
  }
  return "?";
}

struct DiskStore::Op {
  L3Ticket ticket = 0;
  bool is_write = false;
  L3Key key = 0;
  L3Entry entry;
  // A write's copy of its whole slots from submission on (or of source[0, in_place) when the
  // rest is written in place); a read's destination from when it enters the ring (so reads
  // waiting in the backlog hold no memory): its whole slots, or only the bytes of
  // dest[0, in_place) when the rest is read in place.
  StagingBuffer buffer;
  size_t buffer_bytes = 0;
  size_t transfer_bytes = 0;  // bytes the request moves
  size_t done = 0;            // bytes transferred so far (short transfers are continued)
  std::vector<std::span<std::byte>> dest;  // a read's pieces
  // The pieces before in_place are staged: a read's dest[in_place, end) and a write's `source`
  // (the pieces from in_place on) are the kernel's buffers themselves.
  size_t in_place = 0;
  std::vector<std::span<const std::byte>> source;
  size_t kernel_bytes = 0;  // a read's bytes counted against read_bytes_in_kernel, in the ring
  std::vector<iovec> iov;   // a transfer in place: its buffers, from `done` on, while in the ring
  bool transfers_in_place() const { return is_write ? !source.empty() : in_place < dest.size(); }
  std::chrono::steady_clock::time_point submitted;
  std::chrono::steady_clock::time_point in_ring_at;  // first handed to the ring
  bool reached_ring = false;
};

DiskStore::DiskStore(DiskStoreOptions options)
    : options_(std::move(options)), table_(0, options_.page_size) {
  namespace fs = std::filesystem;
  const DiskStoreOptions& o = options_;
  if (o.path.empty()) fail("L3: l3_device is empty");
  if (o.page_size == 0 || o.page_size % kDirectAlignment != 0)
    fail("L3 ", o.path, ": l3_page_size ", o.page_size, " is not a positive multiple of 4096");
  if (o.queue_depth == 0 || o.queue_depth > 4096)
    fail("L3 ", o.path, ": queue depth ", o.queue_depth, " is not in [1, 4096]");
  if (o.read_bytes_in_kernel == 0) fail("L3 ", o.path, ": read_bytes_in_kernel must be positive");

  struct stat st {};
  const bool exists = ::stat(o.path.c_str(), &st) == 0;
  const bool block_device = exists && S_ISBLK(st.st_mode);
  if (o.raw_device) {
    if (!block_device) fail("L3 ", o.path, ": raw_device is set but this is not a block device");
    if (o.index_path.empty()) fail("L3 ", o.path, ": a raw block device needs an index_path");
    data_path_ = o.path;
  } else if (block_device) {
    fail("L3 ", o.path, ": is a block device; its contents would be overwritten, so it is used ",
         "only when raw_device is configured");
  } else if (exists && S_ISDIR(st.st_mode)) {
    data_path_ = (fs::path(o.path) / "k25-l3.data").string();
  } else {
    data_path_ = o.path;
  }
  index_path_ = !o.index_path.empty()           ? o.index_path
                : exists && S_ISDIR(st.st_mode) ? (fs::path(o.path) / "k25-l3.index").string()
                                                : data_path_ + ".index";

  std::error_code ec;
  const bool data_existed = fs::exists(data_path_, ec);
  const bool had_data = data_existed && (block_device || fs::file_size(data_path_, ec) > 0);
  file_ = std::make_unique<IoUringFile>(data_path_, /*create=*/!o.raw_device, o.direct_io,
                                        o.queue_depth);
  if (o.direct_io && !file_->direct())
    warn(concat("L3 ", data_path_, ": the file system refuses O_DIRECT; using buffered I/O"));

  uint64_t capacity = o.capacity_bytes;
  if (o.raw_device) capacity = std::min(capacity, file_->size());
  const uint64_t n_slots = capacity / o.page_size;
  if (n_slots == 0) fail("L3 ", data_path_, ": capacity ", capacity, " bytes is less than a page");
  table_ = L3PageTable(n_slots, o.page_size);
  const uint64_t data_bytes = file_->size();
  journal_ = std::make_unique<L3Journal>(index_path_, o.page_size, o.content_tag);

  if (fs::exists(index_path_, ec)) {
    try {
      // A data file created just now holds none of the indexed pages.
      L3JournalReplay replay = L3Journal::replay(index_path_, n_slots, o.page_size, o.content_tag,
                                                 data_existed ? data_bytes : 0);
      table_ = std::move(replay.table);
      stats_.index_loaded = true;
      stats_.pages_dropped_at_start = replay.dropped;
      stats_.journal_records_replayed = replay.records;
      stats_.journal_bytes_ignored = replay.ignored_bytes;
      if (!replay.tail_problem.empty())
        warn(concat("L3 index ", index_path_, ": ", replay.tail_problem, "; the ",
                    replay.ignored_bytes, " bytes from there on are ignored (", table_.size(),
                    " pages kept)"));
      if (replay.dropped > 0)
        warn(concat("L3 ", index_path_, ": ", replay.dropped,
                    " pages dropped: they lie past the end of ", data_path_,
                    " (deleted or truncated) or past the capacity"));
    } catch (const Error& e) {
      warn(concat(e.what(), "; starting empty"));
    }
  } else if (had_data) {
    warn(concat("L3 ", index_path_, ": index missing; the pages in ", data_path_,
                " are unreachable, starting empty"));
  }
  preallocate_data_file();
  // Compacted at once: a torn tail is cut off, and appends start from a clean end.
  rewrite_journal();
  next_sync_ = std::chrono::steady_clock::now() + o.sync_interval;
}

void DiskStore::preallocate_data_file() {
  const DiskStoreOptions& o = options_;
  const uint64_t bytes = table_.slots().slots_total() * o.page_size;
  if (!o.preallocate || o.raw_device || file_->size() >= bytes) return;
  if (const int rc = file_->preallocate(bytes); rc < 0)
    warn(concat("L3 ", data_path_, ": cannot reserve ", bytes, " bytes (", std::strerror(-rc),
                "); writes may find the disk full later"));
}

DiskStore::~DiskStore() {
  if (!drain(kCloseDrainTimeout)) {
    // The kernel may still write into these buffers: leak them rather than risk corruption.
    warn(concat("L3 ", data_path_, ": ", ops_.size(), " requests still in flight at close"));
    for (auto& [ticket, op] : ops_) op->buffer.leak();
  }
  if (options_.persist_on_close) {
    try {
      persist();
    } catch (const Error& e) {
      warn(e.what());
    }
  } else {
    journal_->flush();  // records of erase() since the last collect()
  }
}

void DiskStore::warn(std::string message) {
  std::cerr << "warning: " << message << "\n";
  if (warnings_.size() == kMaxWarnings) warnings_.erase(warnings_.begin());
  warnings_.push_back(std::move(message));
}

L3Ticket DiskStore::finish_now(L3Key key, bool is_write, L3Status status, int error) {
  const L3Ticket ticket = next_ticket_++;
  done_.emplace(ticket, L3Completion{ticket, is_write, key, status, error});
  return ticket;
}

size_t DiskStore::first_in_place(std::span<const std::span<const std::byte>> pieces, size_t from) {
  return first_in_place_of(pieces, from);
}

L3Ticket DiskStore::submit_write(L3Key key, std::span<const std::byte> bytes) {
  const std::span<const std::byte> one[] = {bytes};
  return submit_write(key, one);
}

L3Ticket DiskStore::submit_write(L3Key key, std::span<const std::span<const std::byte>> pieces,
                                 size_t in_place_from) {
  size_t length = 0;
  for (const auto& piece : pieces) length += piece.size();
  if (length == 0) return finish_now(key, true, L3Status::kLengthMismatch);
  const uint64_t n_slots = (length + options_.page_size - 1) / options_.page_size;
  std::optional<L3Extent> extent;
  if (n_slots <= UINT32_MAX) extent = table_.slots().allocate(static_cast<uint32_t>(n_slots));
  if (!extent) {
    ++stats_.no_space;
    if (std::has_single_bit(stats_.no_space))  // 1st, 2nd, 4th, ...: no flood of warnings
      warn(concat("L3 ", data_path_, ": capacity used up (", table_.slots().slots_free(),
                  " slots free, page needs ", n_slots, "); ", stats_.no_space, " so far"));
    return finish_now(key, true, L3Status::kNoSpace);
  }
  auto op = std::make_unique<Op>();
  op->is_write = true;
  op->key = key;
  op->in_place = first_in_place(pieces, in_place_from);
  const bool in_place = op->in_place < pieces.size();
  if (in_place) {
    // Whole 4 KiB: only the page's own bytes are written, not the rest of its last slot.
    for (size_t i = 0; i < op->in_place; ++i) op->buffer_bytes += pieces[i].size();
    op->transfer_bytes = length;
  } else {
    op->buffer_bytes = n_slots * options_.page_size;
    op->transfer_bytes = op->buffer_bytes;
  }
  if (op->buffer_bytes > 0) {
    op->buffer = staging_.take(op->buffer_bytes);
    if (op->buffer.empty()) {
      table_.slots().release(*extent);
      ++stats_.io_errors;
      return finish_now(key, true, L3Status::kIoError, ENOMEM);
    }
  }
  size_t at = 0;
  for (size_t i = 0; i < op->in_place; ++i) {
    if (!pieces[i].empty()) std::memcpy(op->buffer.data() + at, pieces[i].data(), pieces[i].size());
    at += pieces[i].size();
  }
  stats_.bytes_copied += at;
  uint32_t crc = page_crc(key, op->buffer.data(), at);
  if (in_place) {
    op->source.assign(pieces.begin() + static_cast<ptrdiff_t>(op->in_place), pieces.end());
    for (const auto& piece : op->source) crc = crc32c_extend(crc, piece.data(), piece.size());
  } else {
    std::memset(op->buffer.data() + length, 0, op->buffer_bytes - length);
  }
  op->entry = L3Entry{*extent, length, crc};
  const L3Ticket ticket = next_ticket_++;
  op->ticket = ticket;
  latest_write_[key] = ticket;
  start(std::move(op));
  return ticket;
}

L3Ticket DiskStore::submit_read(L3Key key, std::span<std::byte> bytes) {
  return submit_read(key, std::vector<std::span<std::byte>>{bytes});
}

L3Ticket DiskStore::submit_read(L3Key key, std::vector<std::span<std::byte>> pieces,
                                size_t in_place_from) {
  const L3Entry* entry = table_.find(key);
  if (!entry) {
    ++stats_.not_found;
    return finish_now(key, false, L3Status::kNotFound);
  }
  size_t length = 0;
  for (const auto& piece : pieces) length += piece.size();
  if (length != entry->length) return finish_now(key, false, L3Status::kLengthMismatch);
  auto op = std::make_unique<Op>();
  op->key = key;
  op->entry = *entry;
  op->in_place = first_in_place_of(pieces, in_place_from);
  if (op->in_place < pieces.size()) {
    // No copy of the page: only the pieces before in_place are staged, and only its own bytes
    // are read, not the rest of its last slot.
    for (size_t i = 0; i < op->in_place; ++i) op->buffer_bytes += pieces[i].size();
    op->transfer_bytes = length;
  } else {
    op->buffer_bytes = size_t{entry->extent.n_slots} * options_.page_size;
    op->transfer_bytes = op->buffer_bytes;
  }
  op->dest = std::move(pieces);
  ++read_pins_[entry->extent.first_slot];  // its slots must not be reused while we read them
  const L3Ticket ticket = next_ticket_++;
  op->ticket = ticket;
  start(std::move(op));
  return ticket;
}

std::deque<L3Ticket>& DiskStore::backlog_for(const Op& op) {
  return op.is_write ? write_backlog_ : read_backlog_;
}

void DiskStore::start(std::unique_ptr<Op> op) {
  Op& ref = *op;
  ref.submitted = std::chrono::steady_clock::now();
  ops_.emplace(ref.ticket, std::move(op));
  std::deque<L3Ticket>& backlog = backlog_for(ref);
  if (!backlog.empty() || !queue(ref)) backlog.push_back(ref.ticket);
  pump();
}

bool DiskStore::queue(Op& op) {
  if (in_ring_ >= options_.queue_depth) return false;
  // A quarter of the ring stays free of writes, so that a read never waits behind a full one.
  if (op.is_write && writes_in_ring_ >= std::max(1u, options_.queue_depth * 3 / 4)) return false;
  if (!op.is_write && op.kernel_bytes == 0) {
    // A read enters within the bound (one read always may go), and gets its buffer now.
    const size_t bytes = op.transfers_in_place() ? op.transfer_bytes : op.buffer_bytes;
    if (read_in_kernel_ > 0 && read_in_kernel_ + bytes > options_.read_bytes_in_kernel)
      return false;
    if (op.buffer_bytes > 0) {
      op.buffer = staging_.take(op.buffer_bytes);
      if (op.buffer.empty()) {
        finish(op, L3Status::kIoError, ENOMEM);  // destroys op; it has left the backlog
        return true;
      }
      read_staging_ += op.buffer_bytes;
    }
    op.kernel_bytes = bytes;
    read_in_kernel_ += bytes;
  }
  const uint64_t offset = op.entry.extent.first_slot * options_.page_size + op.done;
  const size_t length = op.transfer_bytes - op.done;
  bool queued;
  if (op.transfers_in_place()) {
    set_vectors(op);
    const auto n = static_cast<unsigned>(op.iov.size());
    queued = op.is_write ? file_->queue_writev(op.iov.data(), n, offset, op.ticket)
                         : file_->queue_readv(op.iov.data(), n, offset, op.ticket);
  } else if (op.is_write) {
    queued = file_->queue_write(op.buffer.data() + op.done, length, offset, op.ticket);
  } else {
    queued = file_->queue_read(op.buffer.data() + op.done, length, offset, op.ticket);
  }
  if (queued) {
    if (!op.reached_ring) {
      op.reached_ring = true;
      op.in_ring_at = std::chrono::steady_clock::now();
    }
    ++in_ring_;
    ++unsubmitted_;
    if (op.is_write) ++writes_in_ring_;
  }
  return queued;
}

void DiskStore::pump() {
  // Reads first: a request waits for them, while writes only move cold pages out.
  pump_backlog(read_backlog_);
  pump_backlog(write_backlog_);
  // A failed submit (EAGAIN, EBUSY) leaves the requests queued; the next pump retries, and
  // waits are bounded, so the caller never hangs on it.
  if (unsubmitted_ == 0) return;  // no system call when there is nothing new
  const int submitted = file_->submit();
  if (submitted > 0) unsubmitted_ -= std::min<size_t>(unsubmitted_, submitted);
}

void DiskStore::pump_backlog(std::deque<L3Ticket>& backlog) {
  while (!backlog.empty()) {
    auto it = ops_.find(backlog.front());
    if (it != ops_.end() && !queue(*it->second)) break;
    backlog.pop_front();
  }
}

void DiskStore::collect(std::chrono::nanoseconds timeout) {
  pump();
  if (in_ring_ > 0) {
    std::vector<IoUringFile::Completion> completions;
    file_->reap(completions, timeout);
    for (const auto& c : completions) {
      --in_ring_;
      auto it = ops_.find(c.user_data);
      if (it == ops_.end()) continue;
      if (it->second->is_write) --writes_in_ring_;
      complete(*it->second, c.result);
    }
    pump();
  }
  commit_journal();
}

void DiskStore::commit_journal() {
  const auto now = std::chrono::steady_clock::now();
  const bool tick = now >= next_sync_;
  if (tick) {
    next_sync_ = now + options_.sync_interval;
    check_files();
  }
  if (journal_->broken() ? now >= next_rewrite_attempt_
                         : journal_->records_in_file() >
                               std::max(kCompactMinRecords, 2 * uint64_t{table_.size()})) {
    rewrite_journal();  // the table holds this batch's changes: nothing is left to append
  }
  if (const int rc = journal_->flush(); rc < 0) {
    ++stats_.journal_errors;
    if (std::has_single_bit(stats_.journal_errors))
      warn(concat("L3 index ", index_path_, ": append failed: ", std::strerror(-rc), "; ",
                  unjournaled_.size(), " writes of this batch fail (", stats_.journal_errors,
                  " journal errors so far)"));
    fail_unjournaled_writes(-rc);
  } else {
    for (const Unjournaled& w : unjournaled_) {
      ++stats_.pages_written;
      stats_.bytes_written += w.entry.length;
    }
  }
  unjournaled_.clear();
  if (tick && !journal_->broken()) {
    // The data first: a synced record never names a page that is not on the device.
    int rc = file_->datasync();
    if (rc == 0) rc = journal_->sync();
    if (rc < 0) {
      ++stats_.journal_errors;
      if (std::has_single_bit(stats_.journal_errors))
        warn(concat("L3 ", data_path_, ": fdatasync failed: ", std::strerror(-rc), " (",
                    stats_.journal_errors, " journal errors so far)"));
    }
  }
}

void DiskStore::fail_unjournaled_writes(int error) {
  const L3Status status = is_no_space(error) ? L3Status::kNoSpace : L3Status::kIoError;
  for (const Unjournaled& w : unjournaled_) {
    auto done = done_.find(w.ticket);
    if (done != done_.end() && done->second.ok()) {
      done->second.status = status;
      done->second.error = error;
      ++(status == L3Status::kNoSpace ? stats_.no_space : stats_.io_errors);
    }
    // Not acknowledged, so not stored: a restart could not find it.
    const L3Entry* current = table_.find(w.key);
    if (current && current->extent.first_slot == w.entry.extent.first_slot) {
      table_.erase(w.key);
      release_extent(w.entry.extent);
    }
  }
}

void DiskStore::rewrite_journal() {
  try {
    if (const int rc = file_->datasync(); rc < 0)
      fail("L3 ", data_path_, ": fdatasync failed: ", std::strerror(-rc));
    journal_->rewrite(table_);
    ++stats_.journal_rewrites;
  } catch (const Error& e) {
    ++stats_.journal_errors;
    next_rewrite_attempt_ = std::chrono::steady_clock::now() + options_.sync_interval;
    if (std::has_single_bit(stats_.journal_errors))
      warn(concat(e.what(), "; writes are not acknowledged until it can be written (",
                  stats_.journal_errors, " journal errors so far)"));
  }
}

void DiskStore::check_files() {
  if (checking_files_) return;
  checking_files_ = true;
  if (!options_.raw_device && file_->unlinked()) replace_data_file();
  if (journal_->unlinked()) {
    ++stats_.index_lost;
    warn(concat("L3 index ", index_path_, ": deleted or replaced while in use; written anew"));
    rewrite_journal();
  }
  checking_files_ = false;
}

void DiskStore::replace_data_file() {
  ++stats_.data_file_lost;
  warn(concat("L3 ", data_path_, ": deleted or replaced while in use; its ", table_.size(),
              " pages are forgotten and a new data file is started"));
  if (!drain(kCloseDrainTimeout)) {
    warn(concat("L3 ", data_path_, ": ", ops_.size(),
                " requests still in flight; the old file stays in use"));
    return;
  }
  try {
    file_ = std::make_unique<IoUringFile>(data_path_, /*create=*/true, options_.direct_io,
                                          options_.queue_depth);
  } catch (const Error& e) {
    warn(concat(e.what(), "; the old file stays in use"));
    return;
  }
  // Nothing is in flight: no slot is pinned, no write pending.
  table_ = L3PageTable(table_.slots().slots_total(), options_.page_size);
  deferred_release_.clear();
  preallocate_data_file();
  rewrite_journal();
}

void DiskStore::complete(Op& op, int result) {
  if (result == -EAGAIN || result == -EINTR) {  // transient: resubmit as is
    if (!queue(op)) backlog_for(op).push_back(op.ticket);
    return;
  }
  if (result < 0) {
    const int error = -result;
    return finish(op, op.is_write && is_no_space(error) ? L3Status::kNoSpace : L3Status::kIoError,
                  error);
  }
  if (result == 0) {  // end of file: the data file was truncated under us
    return finish(op, op.is_write ? L3Status::kNoSpace : L3Status::kIoError, op.is_write ? 0 : EIO);
  }
  op.done += static_cast<size_t>(result);
  if (op.done < op.transfer_bytes) {  // short transfer: continue with the rest
    if (file_->direct() && op.done % kDirectAlignment != 0)
      return finish(op, L3Status::kIoError, EIO);
    if (!queue(op)) backlog_for(op).push_back(op.ticket);
    return;
  }
  finish(op, L3Status::kOk, 0);
}

void DiskStore::finish(Op& op, L3Status status, int error) {
  const L3Ticket ticket = op.ticket;
  if (op.is_write) {
    const auto latest = latest_write_.find(op.key);
    const bool newest = latest != latest_write_.end() && latest->second == ticket;
    if (newest) latest_write_.erase(latest);
    if (status == L3Status::kOk && newest) {
      if (auto old = table_.put(op.key, op.entry)) release_extent(old->extent);
      // Acknowledged (counted as written) once its record is appended, in commit_journal().
      journal_->record_put(op.key, op.entry);
      unjournaled_.push_back({ticket, op.key, op.entry});
    } else {
      // Failed, or superseded by a newer write / erase() of the key while in flight.
      release_extent(op.entry.extent);
    }
    if (status == L3Status::kNoSpace) {
      ++stats_.no_space;
      if (std::has_single_bit(stats_.no_space))
        warn(concat("L3 ", data_path_, ": write failed: ", std::strerror(error ? error : ENOSPC),
                    "; ", stats_.no_space, " so far"));
    }
  } else {
    if (op.reached_ring) {
      read_latency_.record(nanoseconds(std::chrono::steady_clock::now() - op.in_ring_at));
      read_queue_wait_.record(nanoseconds(op.in_ring_at - op.submitted));
    }
    if (status == L3Status::kOk) {
      if (read_crc(op) != op.entry.crc) {
        status = L3Status::kChecksumMismatch;
        ++stats_.checksum_failures;
        if (std::has_single_bit(stats_.checksum_failures))
          warn(concat("L3 ", data_path_, ": page ", op.key, " at slot ", op.entry.extent.first_slot,
                      " fails its checksum; dropped (", stats_.checksum_failures, " so far)"));
        const L3Entry* current = table_.find(op.key);
        if (current && current->extent.first_slot == op.entry.extent.first_slot &&
            current->crc == op.entry.crc) {
          table_.erase(op.key);
          journal_->record_erase(op.key);
          release_extent(op.entry.extent);
        }
      } else {
        size_t at = 0;
        for (size_t i = 0; i < op.in_place; ++i) {
          const auto& piece = op.dest[i];
          if (!piece.empty()) std::memcpy(piece.data(), op.buffer.data() + at, piece.size());
          at += piece.size();
        }
        stats_.bytes_copied += at;
        ++stats_.pages_read;
        stats_.bytes_read += op.entry.length;
        if (table_.touch(op.key)) journal_->record_touch(op.key);  // LRU: a read uses it
      }
    }
    if (!op.buffer.empty()) read_staging_ -= op.buffer_bytes;
    read_in_kernel_ -= op.kernel_bytes;
    const uint64_t slot = op.entry.extent.first_slot;
    if (--read_pins_[slot] == 0) {
      read_pins_.erase(slot);
      auto it = std::find_if(deferred_release_.begin(), deferred_release_.end(),
                             [&](const L3Extent& e) { return e.first_slot == slot; });
      if (it != deferred_release_.end()) {
        table_.slots().release(*it);
        deferred_release_.erase(it);
      }
    }
  }
  if (status == L3Status::kIoError) {
    ++stats_.io_errors;
    if (std::has_single_bit(stats_.io_errors))
      warn(concat("L3 ", data_path_, ": ", op.is_write ? "write" : "read", " of page ", op.key,
                  " failed: ", error ? std::strerror(error) : "short transfer", " (",
                  stats_.io_errors, " so far)"));
  }
  done_.emplace(ticket, L3Completion{ticket, op.is_write, op.key, status, error});
  staging_.give(std::move(op.buffer));  // the kernel is done with it
  ops_.erase(ticket);                   // destroys op
}

void DiskStore::set_vectors(Op& op) {
  op.iov.clear();
  size_t skip = op.done;
  const auto add = [&](const std::byte* data, size_t size) {
    if (skip >= size) {
      skip -= size;
      return;
    }
    // iovec's base is not const; a write only reads through it.
    op.iov.push_back({const_cast<std::byte*>(data) + skip, size - skip});
    skip = 0;
  };
  if (op.buffer_bytes > 0) add(op.buffer.data(), op.buffer_bytes);
  if (op.is_write) {
    for (const auto& piece : op.source) add(piece.data(), piece.size());
  } else {
    for (size_t i = op.in_place; i < op.dest.size(); ++i) add(op.dest[i].data(), op.dest[i].size());
  }
}

uint32_t DiskStore::read_crc(const Op& op) {
  if (!op.transfers_in_place()) return page_crc(op.key, op.buffer.data(), op.entry.length);
  uint32_t crc = page_crc(op.key, op.buffer.data(), op.buffer_bytes);
  for (size_t i = op.in_place; i < op.dest.size(); ++i)
    crc = crc32c_extend(crc, op.dest[i].data(), op.dest[i].size());
  return crc;
}

void DiskStore::release_extent(L3Extent extent) {
  if (read_pins_.count(extent.first_slot)) {
    deferred_release_.push_back(extent);
  } else {
    table_.slots().release(extent);
  }
}

std::vector<L3Completion> DiskStore::poll(std::chrono::milliseconds timeout) {
  collect(done_.empty() ? std::chrono::nanoseconds(timeout) : std::chrono::nanoseconds(0));
  std::vector<L3Completion> out;
  out.reserve(done_.size());
  for (auto& [ticket, completion] : done_) out.push_back(completion);
  done_.clear();
  std::sort(out.begin(), out.end(),
            [](const L3Completion& a, const L3Completion& b) { return a.ticket < b.ticket; });
  return out;
}

L3Completion DiskStore::wait(L3Ticket ticket, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto it = done_.find(ticket); it != done_.end()) {
      const L3Completion completion = it->second;
      done_.erase(it);
      return completion;
    }
    if (!ops_.count(ticket)) return {ticket, false, 0, L3Status::kUnknownTicket, 0};
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) {
      const Op& op = *ops_.at(ticket);
      return {ticket, op.is_write, op.key, L3Status::kTimedOut, 0};
    }
    collect(left);
  }
}

bool DiskStore::drain(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ops_.empty()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return false;
    collect(left);
  }
  return true;
}

std::optional<uint64_t> DiskStore::stored_length(L3Key key) const {
  const L3Entry* entry = table_.find(key);
  if (!entry) return std::nullopt;
  return entry->length;
}

bool DiskStore::erase(L3Key key) {
  // A write still in flight for the key is dropped when it completes.
  const bool pending = latest_write_.erase(key) > 0;
  auto old = table_.erase(key);
  if (old) {
    release_extent(old->extent);
    journal_->record_erase(key);
  }
  return old || pending;
}

void DiskStore::persist() {
  if (const int rc = file_->datasync(); rc < 0)
    fail("L3 ", data_path_, ": fdatasync failed: ", std::strerror(-rc));
  journal_->rewrite(table_);
  ++stats_.journal_rewrites;
}

DiskStoreStats DiskStore::stats() const {
  DiskStoreStats s = stats_;
  s.direct_io = file_->direct();
  s.slots_total = table_.slots().slots_total();
  s.slots_used = s.slots_total - table_.slots().slots_free();
  s.pages_stored = table_.size();
  s.staging_reused = staging_.reused();
  return s;
}

}  // namespace k25
