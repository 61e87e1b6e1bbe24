// flash_scheduler.l3_backend: disk+redis — the local disk tier in front of the shared one. Pages
// evicted from L2 go to both (the shared tier skips those it has); a finished turn's pages go to
// the shared tier at once (write-through) and to the disk when L2 evicts them. A chain is
// restored from the disk for the leading pages it holds, and from Redis for the pages after those.
#pragma once

#include <memory>
#include <unordered_map>

#include "kv/prefix_tier.h"

namespace k25 {

class StackedPrefixTier final : public PrefixTier {
 public:
  StackedPrefixTier(std::unique_ptr<PrefixTier> local, std::unique_ptr<PrefixTier> shared);
  ~StackedPrefixTier() override;  // the disk tier first: its destructor saves the index

  void spill(const CachedPage& page, SpillSource source) override;
  void write_through(const CachedPage& page) override { shared_->write_through(page); }
  bool contains(uint64_t key) const override;
  TierProbeId probe(const uint64_t* keys, size_t n_keys) override;
  bool probe_done(TierProbeId id) const override { return shared_->probe_done(id); }
  std::chrono::milliseconds probe_grace() const override { return shared_->probe_grace(); }
  L3RestoreId begin_restore(std::vector<CachedPage> chain) override;
  bool restore_done(L3RestoreId id) const override;
  RestoredPages end_restore(L3RestoreId id, std::vector<bool>* kept) override;
  void poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) override;
  void limit_in_flight(size_t max_in_flight) override;
  std::chrono::milliseconds read_timeout() const override;

  L3TierStats disk_stats() const override { return local_->disk_stats(); }
  uint64_t disk_pages_stored() const override { return local_->disk_pages_stored(); }
  double disk_read_latency_p99_s() const override { return local_->disk_read_latency_p99_s(); }
  bool has_shared() const override { return true; }
  SharedTierStats shared_stats() const override { return shared_->shared_stats(); }

 private:
  struct Restore {
    size_t local_pages = 0;             // the chain's first pages, from the disk
    size_t shared_pages = 0;            // the pages after them, from Redis
    L3RestoreId local = 0, shared = 0;  // 0: none
  };
  std::unique_ptr<PrefixTier> local_, shared_;
  std::unordered_map<L3RestoreId, Restore> restores_;
  L3RestoreId next_restore_ = 1;
};

}  // namespace k25
