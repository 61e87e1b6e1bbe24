#include "kv/lru_k_prefetcher.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

LruKPrefetcher::LruKPrefetcher(int k, size_t capacity, uint32_t distance)
    : k_(k), capacity_(capacity), distance_(distance) {
  if (k < 1 || k > kMaxK) fail("LRU-K prefetcher: K = ", k, " is not in [1, ", kMaxK, "]");
  if (capacity == 0) fail("LRU-K prefetcher: history capacity must be positive");
  if (distance == 0) fail("LRU-K prefetcher: prefetch distance must be positive");
}

size_t LruKPrefetcher::KeyHash::operator()(const PageRange& r) const {
  uint64_t h = r.stream * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t{r.first} << 32 | r.count) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
  return static_cast<size_t>(h);
}

LruKPrefetcher::Rank LruKPrefetcher::rank(const PageRange& range, const History& h) const {
  // Fewer than K accesses: infinite backward K-distance, evicted first (oldest last access
  // first). Otherwise the oldest K-th most recent access goes first.
  const bool full = h.n >= k_;
  const uint64_t time = full ? h.times[k_ - 1] : h.times[0];
  return {full ? 1 : 0, time, range.stream, range.first, range.count};
}

std::vector<PageRange> LruKPrefetcher::record(const PageRange& range) {
  if (range.count == 0) return {};
  const uint64_t now = ++clock_;
  auto [it, inserted] = history_.try_emplace(range);
  History& h = it->second;
  if (!inserted) order_.erase(rank(range, h));
  std::copy_backward(h.times.begin(), h.times.begin() + std::min(h.n, k_ - 1),
                     h.times.begin() + std::min(h.n, k_ - 1) + 1);
  h.times[0] = now;
  h.n = std::min(h.n + 1, k_);
  order_.insert(rank(range, h));
  const bool hot = h.n >= k_;

  const Rank current = rank(range, h);
  while (history_.size() > capacity_) {
    // Never the range just accessed: otherwise, with the history full of hot ranges, a new range
    // could never collect its K accesses.
    auto victim = order_.begin();
    if (*victim == current) ++victim;
    history_.erase(PageRange{std::get<2>(*victim), std::get<3>(*victim), std::get<4>(*victim)});
    order_.erase(victim);
  }
  if (!hot) return {};

  std::vector<PageRange> out;
  const uint64_t c = range.count;
  for (uint32_t d = 1; d <= distance_; ++d) {  // before, nearest first, clipped at page 0
    const uint64_t end = range.first >= (d - 1) * c ? range.first - (d - 1) * c : 0;
    if (end == 0) break;
    const uint64_t begin = end >= c ? end - c : 0;
    out.push_back({range.stream, static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin)});
  }
  for (uint32_t d = 1; d <= distance_; ++d) {  // after, nearest first
    const uint64_t begin = range.first + d * c;
    if (begin + c > UINT32_MAX) break;
    out.push_back({range.stream, static_cast<uint32_t>(begin), range.count});
  }
  return out;
}

int LruKPrefetcher::accesses(const PageRange& range) const {
  auto it = history_.find(range);
  return it == history_.end() ? 0 : it->second.n;
}

}  // namespace k25
