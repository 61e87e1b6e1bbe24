// The L3 tier behind the prefix cache (R-KV2, R-KV4, R-KV5): prefix-cache pages evicted from L2
// (and every cached page at shutdown) are written to a DiskStore under their chain key, and a
// prompt whose cached chain continues past L2 reads those pages back into fresh L2 pages. The
// store's index persists, so a restarted engine finds the pages of earlier sessions.
//
// A stored page is a header (format tag, parent key, the page's token ids) followed by the L2
// page's K/V bytes (l2_page_const_spans). Where those fill whole 4 KiB, the header is zero-padded
// to 4096 bytes, which costs no disk space (the unpadded header took a slot of its own as well)
// and puts the K/V bytes on 4096-aligned offsets: when each layer's K and V blocks are whole
// 4 KiB too (f16 pages of 16 positions with kv_dim a multiple of 128), a restore reads them
// straight into the L2 page (DiskStore's reads in place) with only the header staged, and a page
// spilled with SpillSource::kPage is written from the L2 page itself: the tier holds a reference
// on it until the write completes, as long as fewer pages wait so than the pool has free. A store
// written with unpadded headers (kRecordVersion 1) is not read: the engine mixes kRecordVersion
// into the store's content tag. finish_restore() checks the header against what the caller
// expects, on top of the store's CRC-32C, so a page is only used for exactly the prefix it was
// computed for. When the capacity is used up, the least recently used pages (written or read
// back longest ago, across restarts) are erased to make room.
// Every failure (missing, corrupt, I/O error, full disk, timeout) is a false
// return or a dropped write with a counted warning: the caller recomputes those positions.
//
// Thread-safety: none; the engine thread calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/rate_limited_warning.h"
#include "kv/disk_store.h"
#include "kv/page_pool.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_tier.h"

namespace k25 {

class L3PrefixTier final : public PrefixTier {
 public:
  // How long a restore may wait for its reads before the rest is given up (recomputed).
  static constexpr std::chrono::milliseconds kReadTimeout{2000};
  // How long a restore waits for the writes of its pages spilled moments ago (a follow-up turn
  // arriving while its pages are on their way to the disk) before recomputing them instead.
  static constexpr std::chrono::milliseconds kWriteWait{50};
  // The stored page's layout: 2 since the header is padded to 4096 bytes.
  static constexpr uint64_t kRecordVersion = 2;

  // Opens the store. Throws k25::Error or IoUringUnavailable (see DiskStore); `pool` must
  // outlive the tier.
  L3PrefixTier(DiskStoreOptions options, PagePool& pool);
  ~L3PrefixTier() override;  // waits (bounded) for writes in flight, saves the index

  // Writes `page` unless its key is stored already: with kCopy (or when the page cannot be
  // written in place, or the pool is short of free pages) the bytes are copied now, otherwise the
  // tier holds a reference on the page until its write completes.
  void spill(const CachedPage& page, SpillSource source) override;
  // Stored, or being written: begin_restore() waits (up to kWriteWait) for such a write.
  bool contains(uint64_t key) const override {
    return store_->contains(key) || writing_.count(key) > 0;
  }
  // Starts reading the pages of a chain (in order from its first missing page; each CachedPage
  // names the key, the expected parent and tokens, and the fresh L2 page to read into) and
  // returns at once: the reads of the leading pages that L3 holds are all in flight, and poll()
  // collects their completions while the caller goes on computing (R-KV2). The tokens must stay
  // valid until finish_restore().
  L3RestoreId begin_restore(std::vector<CachedPage> chain) override;
  // Whether every read of the restore has completed (as seen by poll()).
  bool restore_done(L3RestoreId id) const override;
  // Ends a restore and returns how many leading pages were restored: stored, read back intact
  // and holding the expected parent and tokens. The caller frees the other L2 pages, except
  // those whose read is still in flight (`(*kept)[i]`, when it ends a restore before
  // restore_done()): they stay with the tier until the read completes. A failed page is
  // forgotten, counted and warned about; the caller recomputes it.
  size_t finish_restore(L3RestoreId id, std::vector<bool>* kept);
  RestoredPages end_restore(L3RestoreId id, std::vector<bool>* kept) override {
    return {finish_restore(id, kept), 0};
  }
  // Collects finished writes and reads; waits up to `timeout` for the first when none is ready
  // yet (zero: never blocks). Call once per engine step.
  void poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  // Waits (10 s at most) until no more than `max_in_flight` requests are in flight, e.g. to
  // bound the staging memory of many spills in a row.
  void limit_in_flight(size_t max_in_flight) override;
  std::chrono::milliseconds read_timeout() const override { return kReadTimeout; }

  const L3TierStats& stats() const { return stats_; }
  // Pages the tier holds a reference on until their writes complete.
  size_t pages_held_for_writes() const { return held_for_write_.size(); }
  const DiskStore& store() const { return *store_; }
  // p99 of the device's read latency (from entering the ring to completion), seconds (0 before
  // any read).
  double read_latency_p99_s() const;

  // The tier's counters with the store's failure counts and latencies.
  L3TierStats disk_stats() const override;
  uint64_t disk_pages_stored() const override { return store_->stats().pages_stored; }
  double disk_read_latency_p99_s() const override { return read_latency_p99_s(); }

 private:
  size_t header_bytes() const;  // padded
  std::vector<std::byte> header(const CachedPage& page) const;
  // Erases the least recently used pages until a new one fits the capacity.
  void make_room();
  void account(const L3Completion& done);

  PagePool& pool_;
  std::unique_ptr<DiskStore> store_;
  uint64_t slots_per_page_ = 1;
  std::unordered_set<uint64_t> writing_;                 // keys with a write in flight
  std::unordered_map<L3Ticket, PageId> held_for_write_;  // written in place: freed on completion
  struct LateRead {
    PageId page;                  // freed when the read completes
    std::vector<std::byte> head;  // the header's destination
  };
  std::unordered_map<L3Ticket, LateRead> late_reads_;  // restores ended before these completed
  struct PageRead {
    L3Ticket ticket = 0;
    std::vector<std::byte> expected, found;  // headers; `found` is the read's destination
    bool done = false;
    L3Status status = L3Status::kOk;
  };
  struct Restore {
    std::vector<CachedPage> chain;
    std::vector<PageRead> reads;  // the leading pages that L3 held at the start; never resized
    size_t outstanding = 0;       // reads not completed yet
  };
  std::unordered_map<L3RestoreId, Restore> restores_;
  std::unordered_map<L3Ticket, std::pair<L3RestoreId, size_t>> read_owner_;  // -> restore, read
  L3RestoreId next_restore_ = 1;
  L3TierStats stats_;
  RateLimitedWarning warning_;
};

}  // namespace k25
