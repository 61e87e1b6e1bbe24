// The L3 tier's in-memory page table: key -> extent of fixed-size slots in the data file, the
// stored length and its CRC-32C, the free-slot allocator, and the pages' recency order (least
// recently written or read first), which decides what is evicted. The journal
// (l3_journal.h) records every change so that the table, order included, survives a restart.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

namespace k25 {

using L3Key = uint64_t;

struct L3Extent {
  uint64_t first_slot = 0;
  uint32_t n_slots = 0;
};

struct L3Entry {
  L3Extent extent;
  uint64_t length = 0;  // bytes of payload (the extent is length rounded up to slots)
  uint32_t crc = 0;     // CRC-32C of the key's 8 bytes followed by the payload
};

// Free slots as extents, first fit, neighbours coalesced on release. When every stored page has
// the same size (the L2 page), any freed extent fits the next page exactly, so fragmentation
// does not build up.
class L3SlotAllocator {
 public:
  explicit L3SlotAllocator(uint64_t n_slots);
  std::optional<L3Extent> allocate(uint32_t n_slots);
  void release(L3Extent extent);
  // Marks an extent as used (loading an index); false when any slot of it is not free.
  bool claim(L3Extent extent);
  uint64_t slots_total() const { return n_slots_; }
  uint64_t slots_free() const { return free_slots_; }

 private:
  uint64_t n_slots_;
  uint64_t free_slots_;
  std::map<uint64_t, uint64_t> free_;  // first slot -> length
};

class L3PageTable {
 public:
  L3PageTable(uint64_t n_slots, uint32_t page_size);
  // Moves keep the recency iterators valid (std::list nodes stay put); copies would not.
  L3PageTable(L3PageTable&&) = default;
  L3PageTable& operator=(L3PageTable&&) = default;
  L3PageTable(const L3PageTable&) = delete;
  L3PageTable& operator=(const L3PageTable&) = delete;

  const L3Entry* find(L3Key key) const;
  // Inserts or replaces, as the most recently used; returns the replaced entry (whose extent
  // the caller releases). The slots are the caller's (allocated from slots()).
  std::optional<L3Entry> put(L3Key key, const L3Entry& entry);
  // Replaying a journal: like put(), but claims the entry's slots, and releases those of the
  // entry it replaces. False (nothing changed) when a slot belongs to another entry.
  bool put_claimed(L3Key key, const L3Entry& entry);
  // Makes `key` the most recently used; false when it is not stored.
  bool touch(L3Key key);
  std::optional<L3Entry> erase(L3Key key);
  size_t size() const { return entries_.size(); }
  std::vector<L3Key> keys() const;  // sorted
  // Least recently used first: the eviction order.
  std::vector<L3Key> keys_by_recency() const { return {lru_.begin(), lru_.end()}; }
  std::optional<L3Key> least_recently_used() const;
  L3SlotAllocator& slots() { return slots_; }
  const L3SlotAllocator& slots() const { return slots_; }
  uint32_t page_size() const { return page_size_; }

 private:
  struct Node {
    L3Entry entry;
    std::list<L3Key>::iterator recency;  // its place in lru_
  };
  uint32_t page_size_;
  L3SlotAllocator slots_;
  std::unordered_map<L3Key, Node> entries_;
  std::list<L3Key> lru_;  // least recently used at the front
};

}  // namespace k25
