#include "kv/l3_prefix_tier.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kv/l2_page_spans.h"
#include "kv/prefix_page_header.h"

namespace k25 {

namespace {

constexpr size_t kHeaderAlignment = 4096;  // O_DIRECT's: the K/V bytes after it are read in place

double p99_seconds(const LatencyHistogram& h) {
  return h.count() ? static_cast<double>(h.quantile(0.99)) / 1e9 : 0.0;
}

}  // namespace

L3PrefixTier::L3PrefixTier(DiskStoreOptions options, PagePool& pool)
    : pool_(pool), store_(std::make_unique<DiskStore>(options)) {
  const uint64_t page_size = options.page_size;  // validated by the store
  const uint64_t bytes = header_bytes() + l2_page_payload_bytes(pool_.geometry());
  slots_per_page_ = (bytes + page_size - 1) / page_size;
}

void L3PrefixTier::make_room() {
  // The store keeps the recency order (one entry per stored page, restored at start), so a
  // page written again after a failed restore is not evicted early by its first write's age.
  DiskStoreStats s = store_->stats();
  while (s.slots_total - s.slots_used < slots_per_page_) {
    const std::optional<L3Key> victim = store_->least_recently_used();
    if (!victim) break;
    store_->erase(*victim);
    ++stats_.dropped;
    s = store_->stats();
  }
}

L3PrefixTier::~L3PrefixTier() {
  // A bounded drain lets the writes land before the store saves its index (the store's
  // destructor drains again, also bounded).
  store_->drain(std::chrono::seconds(10));
  for (const L3Completion& done : store_->poll()) account(done);
  // Before late_reads_ goes: a read still in flight is copied into its buffers when it completes.
  store_.reset();
  for (const auto& [ticket, page] : held_for_write_) pool_.free(page);
}

size_t L3PrefixTier::header_bytes() const {
  const size_t bytes = prefix_page_header_bytes(pool_.geometry().page_tokens);
  // Small or odd-sized pages could not be read in place anyway: padding would only cost a slot.
  if (l2_page_payload_bytes(pool_.geometry()) % kHeaderAlignment != 0) return bytes;
  return (bytes + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
}

std::vector<std::byte> L3PrefixTier::header(const CachedPage& page) const {
  std::vector<std::byte> bytes = prefix_page_header(page, pool_.geometry().page_tokens);
  bytes.resize(header_bytes());  // zeros
  return bytes;
}

void L3PrefixTier::spill(const CachedPage& page, SpillSource source) {
  if (contains(page.key)) return;  // stored, or being written
  make_room();
  const std::vector<std::byte> head = header(page);  // staged: copied at submission
  std::vector<std::span<const std::byte>> pieces = {head};
  for (const auto& span : l2_page_const_spans(pool_, page.page)) pieces.push_back(span);
  // Pages waiting for their writes are used memory of the pool: never more of them than it has
  // free pages, so that allocations meanwhile still find room.
  const bool from_page = source == SpillSource::kPage &&
                         held_for_write_.size() < pool_.pages_free() &&
                         DiskStore::first_in_place(pieces, 1) == 1;
  const L3Ticket ticket = store_->submit_write(page.key, pieces, from_page ? 1 : SIZE_MAX);
  writing_.insert(page.key);
  if (from_page) {
    pool_.retain(page.page);
    held_for_write_.emplace(ticket, page.page);
  }
}

L3RestoreId L3PrefixTier::begin_restore(std::vector<CachedPage> chain) {
  const L3RestoreId id = next_restore_++;
  Restore& r = restores_[id];
  r.chain = std::move(chain);
  // The chain's first page that is not stored yet, if its write is in flight, is waited for.
  const auto write_pending = [&] {
    for (const CachedPage& page : r.chain) {
      if (!store_->contains(page.key)) return writing_.count(page.key) > 0;
    }
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() + kWriteWait;
  while (write_pending() && std::chrono::steady_clock::now() < deadline) {
    poll(std::chrono::milliseconds(1));
  }
  size_t n = 0;
  while (n < r.chain.size() && store_->contains(r.chain[n].key)) ++n;
  // Sized once: the reads' header buffers must not move while the reads are in flight.
  r.reads.resize(n);
  for (size_t i = 0; i < n; ++i) {
    PageRead& read = r.reads[i];
    read.expected = header(r.chain[i]);
    read.found.resize(read.expected.size());
    std::vector<std::span<std::byte>> pieces = {read.found};
    pool_.populate(r.chain[i].page);  // written whole when the read completes
    for (const auto& span : l2_page_spans(pool_, r.chain[i].page)) pieces.push_back(span);
    // The L2 page's blocks may be read in place: a page that fails is freed and recomputed.
    read.ticket = store_->submit_read(r.chain[i].key, std::move(pieces), 1);
    read_owner_[read.ticket] = {id, i};
    ++r.outstanding;
  }
  // A read the store answered at once (e.g. not found) is already waiting in its completions.
  poll();
  return id;
}

bool L3PrefixTier::restore_done(L3RestoreId id) const {
  auto it = restores_.find(id);
  return it == restores_.end() || it->second.outstanding == 0;
}

size_t L3PrefixTier::finish_restore(L3RestoreId id, std::vector<bool>* kept) {
  auto it = restores_.find(id);
  if (it == restores_.end()) fail("L3: unknown restore ", id);
  Restore& r = it->second;
  kept->assign(r.chain.size(), false);
  size_t restored = 0;
  for (size_t i = 0; i < r.reads.size(); ++i) {
    PageRead& read = r.reads[i];
    const char* problem = nullptr;
    if (!read.done) {
      // The read still lands in the L2 page and the header buffer when it completes: both stay
      // (moving the vector keeps its buffer) until poll() sees the completion.
      read_owner_.erase(read.ticket);
      late_reads_.emplace(read.ticket, LateRead{r.chain[i].page, std::move(read.found)});
      (*kept)[i] = true;
      problem = "timed out";
    } else if (read.status != L3Status::kOk) {
      problem = to_string(read.status);  // the store has warned about checksum and I/O errors
    } else if (read.found != read.expected) {
      problem = "holds another prefix";
    }
    if (!problem) {
      // Usable only while every page before it was (a chain is used from its start).
      if (restored == i) {
        ++restored;
        ++stats_.restores;
      }
      continue;
    }
    // Forgotten, so that the page is not tried again (it is recomputed and may be spilled anew).
    store_->erase(r.chain[i].key);
    ++stats_.restore_failures;
    warning_.warn(concat("L3 prefix page ", r.chain[i].key, ": ", problem, "; recomputing it (",
                         stats_.restore_failures, " pages so far)"));
  }
  restores_.erase(it);
  return restored;
}

void L3PrefixTier::account(const L3Completion& done) {
  if (!done.is_write) {
    auto owner = read_owner_.find(done.ticket);
    if (owner != read_owner_.end()) {
      Restore& r = restores_.at(owner->second.first);
      PageRead& read = r.reads[owner->second.second];
      read.done = true;
      read.status = done.status;
      --r.outstanding;
      read_owner_.erase(owner);
      return;
    }
    auto it = late_reads_.find(done.ticket);
    if (it != late_reads_.end()) {
      pool_.free(it->second.page);
      late_reads_.erase(it);
    }
    return;
  }
  writing_.erase(done.key);
  if (auto held = held_for_write_.find(done.ticket); held != held_for_write_.end()) {
    pool_.free(held->second);
    held_for_write_.erase(held);
  }
  if (done.ok()) {
    ++stats_.spills;
  } else {
    ++stats_.spill_failures;  // the store warned (no space, I/O error); the page is recomputed
  }
}

void L3PrefixTier::poll(std::chrono::milliseconds timeout) {
  for (const L3Completion& done : store_->poll(timeout)) account(done);
}

void L3PrefixTier::limit_in_flight(size_t max_in_flight) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store_->in_flight() > max_in_flight && std::chrono::steady_clock::now() < deadline) {
    for (const L3Completion& done : store_->poll(std::chrono::milliseconds(100))) account(done);
  }
}

double L3PrefixTier::read_latency_p99_s() const {
  return p99_seconds(store_->read_latency());
}

L3TierStats L3PrefixTier::disk_stats() const {
  L3TierStats out = stats_;
  const DiskStoreStats s = store_->stats();
  out.checksum_failures = s.checksum_failures;
  out.io_errors = s.io_errors;
  out.no_space = s.no_space;
  out.journal_errors = s.journal_errors;
  out.files_lost = s.data_file_lost + s.index_lost;
  out.writes_in_flight = writing_.size();
  out.read_queue_wait_p99_s = p99_seconds(store_->read_queue_wait());
  return out;
}

}  // namespace k25
