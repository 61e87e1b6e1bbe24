#include "kv/l3_page_table.h"

#include <algorithm>
#include <iterator>

namespace k25 {

L3SlotAllocator::L3SlotAllocator(uint64_t n_slots) : n_slots_(n_slots), free_slots_(n_slots) {
  if (n_slots > 0) free_.emplace(0, n_slots);
}

std::optional<L3Extent> L3SlotAllocator::allocate(uint32_t n_slots) {
  if (n_slots == 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n_slots) continue;
    const L3Extent extent{it->first, n_slots};
    const uint64_t rest = it->second - n_slots;
    const uint64_t rest_first = it->first + n_slots;
    free_.erase(it);
    if (rest > 0) free_.emplace(rest_first, rest);
    free_slots_ -= n_slots;
    return extent;
  }
  return std::nullopt;
}

void L3SlotAllocator::release(L3Extent extent) {
  uint64_t first = extent.first_slot;
  uint64_t length = extent.n_slots;
  auto next = free_.lower_bound(first);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {  // merge with the free run before
      first = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && extent.first_slot + extent.n_slots == next->first) {
    length += next->second;
    free_.erase(next);
  }
  free_.emplace(first, length);
  free_slots_ += extent.n_slots;
}

bool L3SlotAllocator::claim(L3Extent extent) {
  if (extent.n_slots == 0 || extent.first_slot >= n_slots_ ||
      extent.n_slots > n_slots_ - extent.first_slot)
    return false;
  auto it = free_.upper_bound(extent.first_slot);
  if (it == free_.begin()) return false;
  --it;  // the free run starting at or before first_slot
  const uint64_t run_first = it->first, run_length = it->second;
  const uint64_t end = extent.first_slot + extent.n_slots;
  if (end > run_first + run_length) return false;
  free_.erase(it);
  if (extent.first_slot > run_first) free_.emplace(run_first, extent.first_slot - run_first);
  if (run_first + run_length > end) free_.emplace(end, run_first + run_length - end);
  free_slots_ -= extent.n_slots;
  return true;
}

L3PageTable::L3PageTable(uint64_t n_slots, uint32_t page_size)
    : page_size_(page_size), slots_(n_slots) {}

const L3Entry* L3PageTable::find(L3Key key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second.entry;
}

std::optional<L3Entry> L3PageTable::put(L3Key key, const L3Entry& entry) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    lru_.push_back(key);
    entries_.emplace(key, Node{entry, std::prev(lru_.end())});
    return std::nullopt;
  }
  const L3Entry old = it->second.entry;
  it->second.entry = entry;
  lru_.splice(lru_.end(), lru_, it->second.recency);
  return old;
}

bool L3PageTable::put_claimed(L3Key key, const L3Entry& entry) {
  const L3Entry* old = find(key);
  if (old) slots_.release(old->extent);
  if (!slots_.claim(entry.extent)) {
    if (old) slots_.claim(old->extent);  // just released: still free
    return false;
  }
  put(key, entry);
  return true;
}

bool L3PageTable::touch(L3Key key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  lru_.splice(lru_.end(), lru_, it->second.recency);
  return true;
}

std::optional<L3Entry> L3PageTable::erase(L3Key key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const L3Entry old = it->second.entry;
  lru_.erase(it->second.recency);
  entries_.erase(it);
  return old;
}

std::vector<L3Key> L3PageTable::keys() const {
  std::vector<L3Key> out;
  out.reserve(entries_.size());
  for (const auto& [key, node] : entries_) out.push_back(key);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<L3Key> L3PageTable::least_recently_used() const {
  if (lru_.empty()) return std::nullopt;
  return lru_.front();
}

}  // namespace k25
