// The L3 prefetcher of R-KV3: LRU-K with K = 3. It records accesses to page ranges and, once a
// range has been accessed K times, proposes the adjacent ranges (the same number of pages just
// before and just after it, `distance` ranges each side, clipped at page 0) on that access and
// every later one; the caller skips pages already resident or in flight.
//
// The access history is bounded: past `capacity` tracked ranges, the one with the largest
// backward K-distance is forgotten (LRU-K's victim: ranges seen fewer than K times first,
// oldest last access first; otherwise the one whose K-th most recent access is oldest), so a
// burst of one-off accesses cannot push out the ranges that are really reused.
//
// Pure bookkeeping (no I/O, no clock: time is the access count). Not synchronised.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace k25 {

struct PageRange {
  uint64_t stream = 0;  // a sequence or session
  uint32_t first = 0;   // first page index
  uint32_t count = 1;   // pages
  bool operator==(const PageRange&) const = default;
};

class LruKPrefetcher {
 public:
  static constexpr int kMaxK = 8;

  // Throws k25::Error unless 1 <= k <= kMaxK, capacity >= 1 and distance >= 1.
  explicit LruKPrefetcher(int k = 3, size_t capacity = 4096, uint32_t distance = 1);

  // Records one access to `range` and returns the ranges to prefetch (none before the K-th
  // access). Ranges with count 0 are ignored.
  std::vector<PageRange> record(const PageRange& range);
  // How many accesses to `range` are remembered (at most K; 0 once forgotten).
  int accesses(const PageRange& range) const;
  size_t tracked() const { return history_.size(); }

 private:
  struct KeyHash {
    size_t operator()(const PageRange& r) const;
  };
  struct History {
    std::array<uint64_t, kMaxK> times{};  // most recent first
    int n = 0;                            // accesses remembered, <= k_
  };
  // Eviction order: the smallest tuple goes first.
  using Rank = std::tuple<int, uint64_t, uint64_t, uint32_t, uint32_t>;
  Rank rank(const PageRange& range, const History& h) const;

  int k_;
  size_t capacity_;
  uint32_t distance_;
  uint64_t clock_ = 0;
  std::unordered_map<PageRange, History, KeyHash> history_;
  std::set<Rank> order_;
};

}  // namespace k25
