// The L1 KV tier (SPEC R-KV L1 / l1_cache_size): a write-through copy of each sequence's most
// recent `window` positions, in one contiguous ring per (layer, K/V), for attention to read
// instead of the inner cache's pages.
//
// A decorator over the cache that really holds the KV (the paged L2 tier, not owned): store()
// writes the inner cache AND the ring, so the inner cache always holds every position (its pages
// are published to the prefix cache, spilled to disk and shared) and the ring is never the only
// copy. key_run()/value_rows() serve a position from the ring when it is in the ring's valid
// range of that (sequence, layer): the positions written through store() since the last clear(),
// at most the newest `window` of them and only a gap-free run ending at the newest, from its first
// key tile boundary on (so a run from the ring starts a tile). Everything
// else (older positions, positions adopted from the prefix cache or restored from disk, rows
// written around this class) comes from the inner cache, with the run clipped so that it never
// crosses into the ring's range: attention then reads the newest positions from the ring.
//
// Layout: position p sits in slot p % window; per (sequence, layer) the K block and the V block
// each hold `window` positions of kv_dim elements of the inner cache's dtype, 64-byte aligned:
// the V block rows, the K block key tiles of key_tile_width(window) slots. A sequence's ring is
// allocated on its first store() and freed by clear().
//
// Eviction: the ring always holds the newest positions, so storing position p evicts p - window.
// `l1_eviction_policy` lru and fifo choose the same victim here: the oldest position is the
// first one in (fifo) and also the least recently used (lru), because causal attention reads
// every position of the sequence at every step, so no position in the window is used more
// recently than another. So the class takes no policy: both config values give this ring.
//
// Hit share: key_run() counts the positions of each run it returns, as ring (hit) or inner
// (miss). The counters are per thread slot, written without read-modify-write instructions, so the
// attention workers do not contend on them.
//
// Thread-safety as PagedKvCache: store(), reserve(), clear() and reset_hit_counts() from one
// thread; key_run()/value_rows() concurrently from the attention workers while none of those
// runs. Every clear() of a sequence must go through this class (clearing only the inner cache
// leaves a stale ring that key_run() would serve).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_cache.h"

namespace k25 {

class L1WindowKvCache final : public KvCache {
 public:
  static constexpr int kDefaultWindow = 128;  // R-KV's l1_cache_size

  // Throws k25::Error on a non-positive shape or window. Rows are of the inner cache's dtype.
  L1WindowKvCache(KvCache& inner, int n_layers, int kv_dim, int window = kDefaultWindow);
  ~L1WindowKvCache() override;
  L1WindowKvCache(const L1WindowKvCache&) = delete;
  L1WindowKvCache& operator=(const L1WindowKvCache&) = delete;

  KvDtype dtype() const override { return dtype_; }
  void reserve(int seq, int n_positions) override;
  void clear(int seq) override;
  KeyRun key_run(int seq, int layer, int pos) override;
  std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) override;
  // Writes the inner cache, then the ring. kv_dim must be the one given at construction.
  void store(int seq, int layer, int pos, const float* k, const float* v, int kv_dim) override;

  // Positions key_run() served from the ring / in all, summed over every key_run() call since
  // construction or reset_hit_counts().
  uint64_t ring_positions_served() const;
  uint64_t positions_served() const;
  // ring_positions_served() / positions_served(), 0 before any key_run() call.
  double hit_share() const;
  void reset_hit_counts();

  int window() const { return window_; }
  // Ring memory held now, over all sequences.
  size_t bytes_used() const;

 private:
  // The ring's valid positions [lo, hi) of one (sequence, layer); empty when lo == hi.
  struct Range {
    int lo = 0, hi = 0;
  };
  struct FreeAligned {
    void operator()(std::byte* p) const;
  };
  struct Sequence {
    std::unique_ptr<std::byte[], FreeAligned> ring;  // [layer][K, V][window rows], blocks aligned
    std::vector<Range> ranges;                       // by layer
  };
  // Counters of one thread slot, on their own cache line.
  struct alignas(64) HitCounts {
    std::atomic<uint64_t> ring{0}, inner{0};
  };

  int served_from(const Range& r) const;
  std::byte* ring_block(int seq, int layer, int pos, bool value, int* slot, int* n_contiguous,
                        int* below_ring);
  std::byte* block(Sequence& s, int layer, bool value) const;
  void count(bool in_ring, int n);

  KvCache& inner_;
  int n_layers_, kv_dim_, window_, key_tile_;
  KvDtype dtype_;
  size_t row_bytes_;
  size_t block_bytes_;  // one K (or V) block, padded to the alignment
  std::vector<Sequence> sequences_;
  std::unique_ptr<HitCounts[]> counts_;  // kCountSlots per-thread slots, then one shared slot
};

}  // namespace k25
