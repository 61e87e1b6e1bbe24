// The tiers behind the L2 prefix cache (docs/kv-cache.md): where evicted pages go and where a
// prompt's chain is looked for past L2. Implementations: L3PrefixTier (the local disk, over
// DiskStore), RedisPrefixTier (a Redis shared by replicas, over RedisStore), and
// StackedPrefixTier (the local disk in front of Redis: flash_scheduler.l3_backend disk+redis).
//
// The engine asks, for the first page of a prompt that L2 lacks: contains(key)? A tier that can
// only know by asking a server answers false until a probe() of the chain has completed (the
// sequence waits, unscheduled, for it); then begin_restore() fills fresh L2 pages, and
// end_restore() says how many leading pages were restored, and from which tier.
//
// Thread-safety: none; the engine thread calls everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/prefix_cache.h"

namespace k25 {

using L3RestoreId = uint64_t;
using TierProbeId = uint64_t;

enum class KvTierKind : uint8_t { kDisk, kShared };

// Where a spilled page's bytes are taken from while its write is in flight.
enum class SpillSource : uint8_t { kCopy, kPage };

struct RestoredPages {
  size_t total = 0;   // leading pages of the chain restored
  size_t shared = 0;  // of those, read from the shared tier (the rest from the local disk)
};

struct L3TierStats {
  uint64_t spills = 0;            // pages written (completed successfully)
  uint64_t spill_failures = 0;    // writes that failed (no space, I/O error)
  uint64_t restores = 0;          // pages read back into L2
  uint64_t restore_failures = 0;  // pages found in L3 but not usable: recomputed instead
  uint64_t dropped = 0;           // least recently used pages erased to make room for new ones
  // The local disk's failures, as its store counted them (damage is detected, never served).
  uint64_t checksum_failures = 0;    // pages read back with other bytes than were written
  uint64_t io_errors = 0;            // reads or writes that failed (e.g. a truncated file)
  uint64_t no_space = 0;             // writes refused: full disk or capacity used up
  uint64_t journal_errors = 0;       // index journal appends, syncs or rewrites that failed
  uint64_t files_lost = 0;           // data file or index deleted while in use
  uint64_t writes_in_flight = 0;     // spills not acknowledged (nor failed) yet
  double read_queue_wait_p99_s = 0;  // submission until the read entered the ring
};

// The shared tier's counters (k25_shared_kv_* in /metrics).
struct SharedTierStats {
  uint64_t hits = 0, misses = 0;  // pages asked for that Redis held / did not hold
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t errors = 0;            // requests that failed (down, slow, full): recomputed
  uint64_t corrupt = 0;           // values that failed the CRC or header check: recomputed
  uint64_t writes = 0;            // pages written
  uint64_t writes_skipped = 0;    // not written: over the in-flight budget or Redis down
  uint64_t writes_in_flight = 0;  // SETs sent, not answered yet
  uint64_t restores = 0;          // pages restored into L2
  double read_p50_s = 0, read_p99_s = 0;
  bool up = false;
};

class PrefixTier {
 public:
  virtual ~PrefixTier() = default;

  // A page evicted from L2 (or saved at shutdown). kCopy: its bytes are copied now (its memory is
  // needed at once); kPage: the tier may keep a reference on the page (PagePool::retain) and
  // write from it, giving it back when the write completes.
  virtual void spill(const CachedPage& page, SpillSource source) = 0;
  // A page of a turn that just finished: tiers shared with other replicas write it at once, so
  // that the next turn finds it wherever it lands. The bytes are copied now.
  virtual void write_through(const CachedPage& page) { (void)page; }
  virtual bool contains(uint64_t key) const = 0;
  // Starts finding out which of `keys` (a chain's pages after those in L2, in order) a remote
  // tier holds; 0 when no tier needs to ask (contains() already knows).
  virtual TierProbeId probe(const uint64_t* keys, size_t n_keys) {
    (void)keys;
    (void)n_keys;
    return 0;
  }
  virtual bool probe_done(TierProbeId id) const {
    (void)id;
    return true;
  }
  // How long the engine may hold a step for a probe it just started, so that a sequence whose
  // answer comes back at once joins that step instead of the next one.
  virtual std::chrono::milliseconds probe_grace() const { return std::chrono::milliseconds(0); }
  // See L3PrefixTier: reads the leading pages of `chain` that the tier holds into the fresh L2
  // pages the chain names; restore_done() when all reads completed; end_restore() ends it.
  virtual L3RestoreId begin_restore(std::vector<CachedPage> chain) = 0;
  virtual bool restore_done(L3RestoreId id) const = 0;
  virtual RestoredPages end_restore(L3RestoreId id, std::vector<bool>* kept) = 0;
  // Collects completions; waits up to `timeout` for the first when none is ready.
  virtual void poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) = 0;
  virtual void limit_in_flight(size_t max_in_flight) = 0;
  // How long a restore or probe may wait before the rest is recomputed.
  virtual std::chrono::milliseconds read_timeout() const = 0;

  // The local disk tier's figures (zero without one).
  virtual L3TierStats disk_stats() const { return {}; }
  virtual uint64_t disk_pages_stored() const { return 0; }
  virtual double disk_read_latency_p99_s() const { return 0; }
  virtual bool has_shared() const { return false; }
  virtual SharedTierStats shared_stats() const { return {}; }
};

}  // namespace k25
