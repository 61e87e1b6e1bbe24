#include "kv/l1_window_cache.h"

#include <algorithm>
#include <new>

#include "core/error.h"

namespace k25 {

namespace {

constexpr size_t kAlignment = 64;  // attention reads rows with SIMD loads
// Threads that get their own hit counter slot; later threads share one more slot.
constexpr int kCountSlots = 32;

// A process-wide slot per thread, handed out in order of first use. A thread with a slot below
// kCountSlots is its only writer in every cache, so it may add without a locked instruction.
int thread_slot() {
  static std::atomic<int> next{0};
  thread_local const int slot = [] {
    const int n = next.fetch_add(1, std::memory_order_relaxed);
    return n >= 0 && n < kCountSlots ? n : kCountSlots;
  }();
  return slot;
}

}  // namespace

void L1WindowKvCache::FreeAligned::operator()(std::byte* p) const {
  ::operator delete (p, std::align_val_t{kAlignment});
}

L1WindowKvCache::L1WindowKvCache(KvCache& inner, int n_layers, int kv_dim, int window)
    : inner_(inner),
      n_layers_(n_layers),
      kv_dim_(kv_dim),
      window_(window),
      key_tile_(key_tile_width(window)),
      dtype_(inner.dtype()),
      row_bytes_(static_cast<size_t>(kv_dim) * kv_dtype_bytes(dtype_)),
      counts_(new HitCounts[kCountSlots + 1]) {
  if (n_layers < 1 || kv_dim < 1 || window < 1) {
    fail("L1 KV window: layers (", n_layers, "), kv_dim (", kv_dim, ") and window (", window,
         ") must be positive");
  }
  const size_t bytes = static_cast<size_t>(window) * row_bytes_;
  block_bytes_ = (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

L1WindowKvCache::~L1WindowKvCache() = default;

void L1WindowKvCache::reserve(int seq, int n_positions) {
  inner_.reserve(seq, n_positions);
}

void L1WindowKvCache::clear(int seq) {
  inner_.clear(seq);
  if (seq >= 0 && static_cast<size_t>(seq) < sequences_.size()) sequences_[seq] = Sequence{};
}

std::byte* L1WindowKvCache::block(Sequence& s, int layer, bool value) const {
  return s.ring.get() + (static_cast<size_t>(layer) * 2 + (value ? 1 : 0)) * block_bytes_;
}

void L1WindowKvCache::count(bool in_ring, int n) {
  const int slot = thread_slot();
  std::atomic<uint64_t>& counter = in_ring ? counts_[slot].ring : counts_[slot].inner;
  if (slot < kCountSlots) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  } else {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
}

// The ring serves its range from the first position at a key tile boundary on, so every run it
// returns starts a tile; the inner cache (which holds every position) serves the ones before.
int L1WindowKvCache::served_from(const Range& r) const {
  return (r.lo + key_tile_ - 1) / key_tile_ * key_tile_;
}

// The ring's K or V block of (seq, layer) and pos's slot in it when the ring serves pos (the
// positions from pos on that it serves in *n_contiguous); otherwise null, with *below_ring the
// ring's first served position when pos is older than it (-1 if not).
std::byte* L1WindowKvCache::ring_block(int seq, int layer, int pos, bool value, int* slot,
                                       int* n_contiguous, int* below_ring) {
  *below_ring = -1;
  if (seq < 0 || static_cast<size_t>(seq) >= sequences_.size() || layer < 0 || layer >= n_layers_) {
    return nullptr;
  }
  Sequence& s = sequences_[seq];
  if (!s.ring) return nullptr;
  const int lo = served_from(s.ranges[layer]), hi = s.ranges[layer].hi;
  if (pos >= lo && pos < hi) {
    *slot = pos % window_;
    *n_contiguous = std::min(window_ - *slot, hi - pos);
    return block(s, layer, value);
  }
  if (pos < lo && lo < hi) *below_ring = lo;
  return nullptr;
}

KeyRun L1WindowKvCache::key_run(int seq, int layer, int pos) {
  int slot = 0, n = 0, below_ring = -1;
  if (std::byte* keys = ring_block(seq, layer, pos, false, &slot, &n, &below_ring)) {
    count(true, n);
    const int lane = slot % key_tile_;
    return {keys + static_cast<size_t>(slot - lane) * row_bytes_, lane, key_tile_, n};
  }
  KeyRun run = inner_.key_run(seq, layer, pos);
  if (below_ring >= 0) run.n = std::min(run.n, below_ring - pos);
  count(false, run.n);
  return run;
}

std::byte* L1WindowKvCache::value_rows(int seq, int layer, int pos, int* n_contiguous) {
  int slot = 0, below_ring = -1;
  if (std::byte* values = ring_block(seq, layer, pos, true, &slot, n_contiguous, &below_ring)) {
    return values + static_cast<size_t>(slot) * row_bytes_;
  }
  std::byte* p = inner_.value_rows(seq, layer, pos, n_contiguous);
  if (below_ring >= 0) *n_contiguous = std::min(*n_contiguous, below_ring - pos);
  return p;
}

void L1WindowKvCache::store(int seq, int layer, int pos, const float* k, const float* v,
                            int kv_dim) {
  if (kv_dim != kv_dim_) fail("L1 KV window: row of ", kv_dim, " floats, expected ", kv_dim_);
  if (seq < 0 || layer < 0 || layer >= n_layers_) {
    fail("L1 KV window: sequence ", seq, " layer ", layer, " is not a valid row (", n_layers_,
         " layers)");
  }
  inner_.store(seq, layer, pos, k, v, kv_dim);  // throws for an unreserved position
  if (static_cast<size_t>(seq) >= sequences_.size()) sequences_.resize(seq + 1);
  Sequence& s = sequences_[seq];
  if (!s.ring) {
    const size_t bytes = 2 * static_cast<size_t>(n_layers_) * block_bytes_;
    s.ring.reset(static_cast<std::byte*>(::operator new (bytes, std::align_val_t{kAlignment})));
    s.ranges.assign(n_layers_, Range{});
  }
  Range& r = s.ranges[layer];
  if (pos == r.hi && r.lo < r.hi) {
    r.hi = pos + 1;  // the newest position: evicts pos - window when the ring is full
    r.lo = std::max(r.lo, r.hi - window_);
  } else if (pos < r.lo || pos >= r.hi) {
    if (pos < r.lo && r.lo < r.hi) return;  // older than the ring: the inner cache holds it
    r = {pos, pos + 1};                     // a first row or a gap: the ring restarts at pos
  }
  const int slot = pos % window_, lane = slot % key_tile_;
  kv_store_key(dtype_, k, block(s, layer, false) + static_cast<size_t>(slot - lane) * row_bytes_,
               lane, key_tile_, kv_dim);
  kv_store_row(dtype_, v, block(s, layer, true) + static_cast<size_t>(slot) * row_bytes_, kv_dim);
}

uint64_t L1WindowKvCache::ring_positions_served() const {
  uint64_t n = 0;
  for (int i = 0; i <= kCountSlots; ++i) n += counts_[i].ring.load(std::memory_order_relaxed);
  return n;
}

uint64_t L1WindowKvCache::positions_served() const {
  uint64_t n = 0;
  for (int i = 0; i <= kCountSlots; ++i) {
    n += counts_[i].ring.load(std::memory_order_relaxed) +
         counts_[i].inner.load(std::memory_order_relaxed);
  }
  return n;
}

double L1WindowKvCache::hit_share() const {
  const uint64_t all = positions_served();
  return all == 0 ? 0.0 : static_cast<double>(ring_positions_served()) / static_cast<double>(all);
}

void L1WindowKvCache::reset_hit_counts() {
  for (int i = 0; i <= kCountSlots; ++i) {
    counts_[i].ring.store(0, std::memory_order_relaxed);
    counts_[i].inner.store(0, std::memory_order_relaxed);
  }
}

size_t L1WindowKvCache::bytes_used() const {
  size_t n = 0;
  for (const Sequence& s : sequences_) {
    if (s.ring) n += 2 * static_cast<size_t>(n_layers_) * block_bytes_;
  }
  return n;
}

}  // namespace k25
