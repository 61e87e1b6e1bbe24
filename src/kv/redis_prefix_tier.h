// The shared KV tier (docs/kv-cache.md "Shared tier on Redis"): prefix-cache pages in a Redis that
// several replicas use, so a session's next turn finds its history wherever it lands.
//
// - Writes: a finished turn's pages (write_through) and pages evicted from L2 (spill) are SET with
//   a TTL, asynchronously (the bytes are encoded now, the request goes to RedisStore's I/O
//   thread). Pages this replica wrote or read are not written again. Eviction beyond the TTL is
//   Redis's (maxmemory-policy); a write that fails (full: OOM) is counted and dropped.
// - Reads: probe() GETs a chain's pages in one pipeline; intact values (shared_page_value.h) are
//   kept in memory until begin_restore() copies them into fresh L2 pages, which it does at once
//   (the restore is done when it starts). A page restored gets its TTL renewed (EXPIRE).
// - Every failure (down, slow, full, corrupt, another prefix) is counted and the pages are
//   recomputed: the tier never fails a request or returns wrong KV.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/rate_limited_warning.h"
#include "kv/page_pool.h"
#include "kv/prefix_tier.h"
#include "kv/redis_store.h"

namespace k25 {

struct RedisTierOptions {
  RedisStoreOptions store;
  std::string kv_namespace;  // shared_kv_namespace()
  // How long a probe may wait for Redis before the sequence computes instead.
  std::chrono::milliseconds read_timeout{500};
  // How long a step may wait for a probe just started (PrefixTier::probe_grace): a nearby
  // Redis answers a probe of missing pages (no bytes) well within it.
  std::chrono::milliseconds probe_grace{2};
  size_t max_write_bytes = size_t{256} << 20;    // SETs in flight; beyond, writes are skipped
  size_t max_fetched_bytes = size_t{256} << 20;  // values read and not yet restored
};

class RedisPrefixTier final : public PrefixTier {
 public:
  // `pool` must outlive the tier. Never throws for an unreachable Redis.
  RedisPrefixTier(RedisTierOptions options, PagePool& pool);
  ~RedisPrefixTier() override;  // waits (bounded by the store's timeouts) for the writes

  void spill(const CachedPage& page, SpillSource) override { write(page); }  // always copies
  void write_through(const CachedPage& page) override { write(page); }
  bool contains(uint64_t key) const override { return fetched_.count(key) != 0; }
  TierProbeId probe(const uint64_t* keys, size_t n_keys) override;
  bool probe_done(TierProbeId id) const override { return probes_.count(id) == 0; }
  std::chrono::milliseconds probe_grace() const override { return options_.probe_grace; }
  L3RestoreId begin_restore(std::vector<CachedPage> chain) override;
  bool restore_done(L3RestoreId) const override { return true; }
  RestoredPages end_restore(L3RestoreId id, std::vector<bool>* kept) override;
  void poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  void limit_in_flight(size_t max_in_flight) override;
  std::chrono::milliseconds read_timeout() const override { return options_.read_timeout; }
  bool has_shared() const override { return true; }
  SharedTierStats shared_stats() const override;

 private:
  void write(const CachedPage& page);
  void warn(const char* what, uint64_t count);
  RateLimitedWarning warning_;

  RedisTierOptions options_;
  PagePool& pool_;
  size_t page_bytes_;  // header + K/V, without the CRC
  std::unique_ptr<RedisStore> store_;
  struct Fetched {
    std::string value;
    std::chrono::steady_clock::time_point at;
  };
  std::unordered_map<uint64_t, Fetched> fetched_;  // chain key -> intact value
  size_t fetched_bytes_ = 0;
  struct Pending {
    uint64_t key = 0;
    TierProbeId probe = 0;  // GETs
    size_t bytes = 0;       // SETs
  };
  std::unordered_map<RedisTicket, Pending> pending_;
  std::unordered_map<TierProbeId, size_t> probes_;  // -> GETs outstanding
  std::unordered_set<uint64_t> asked_;              // keys with a GET in flight
  std::unordered_set<uint64_t> writing_;            // keys with a SET in flight
  std::unordered_set<uint64_t> known_;              // written or read by this replica
  size_t write_bytes_ = 0;
  std::unordered_map<L3RestoreId, size_t> restored_;  // restores ended at begin_restore()
  TierProbeId next_probe_ = 1;
  L3RestoreId next_restore_ = 1;
  SharedTierStats stats_;  // the tier's part (corrupt, writes, restores)
};

}  // namespace k25
