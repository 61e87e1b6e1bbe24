// The L3 tier's in-memory page table: key -> extent of fixed-size slots in the data file, the
// stored length and its CRC-32C, plus the free-slot allocator. It can be saved to and loaded from
// a small index file (written to a temporary name, fsynced and renamed over the old one, with a
// checksum of its own), which is how stored pages survive a restart.
//
// Index file (little-endian, as written by x86-64):
//   "K25L3IDX" u32 version=1 u32 page_size u64 content_tag u64 n_slots u64 n_entries
//   n_entries x { u64 key, u64 first_slot, u32 n_slots, u32 crc, u64 length }
//   u32 CRC-32C of everything above
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
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

  const L3Entry* find(L3Key key) const;
  // Inserts or replaces; returns the replaced entry (whose extent the caller releases).
  std::optional<L3Entry> put(L3Key key, const L3Entry& entry);
  std::optional<L3Entry> erase(L3Key key);
  size_t size() const { return entries_.size(); }
  std::vector<L3Key> keys() const;
  L3SlotAllocator& slots() { return slots_; }
  const L3SlotAllocator& slots() const { return slots_; }
  uint32_t page_size() const { return page_size_; }

  // Writes the index atomically (tmp file, fsync, rename, fsync of the directory).
  // Throws k25::Error naming the path on any failure; the old index then stays in place.
  void save(const std::string& path, uint64_t content_tag) const;
  // Reads and validates an index written by save(). Entries whose extent ends past
  // `data_file_bytes` (a truncated or replaced data file) or past n_slots are left out and
  // counted in *dropped. Throws k25::Error with the reason when the file is unreadable, has a
  // bad checksum, another page size or content tag, or overlapping/duplicate entries.
  static L3PageTable load(const std::string& path, uint64_t n_slots, uint32_t page_size,
                          uint64_t content_tag, uint64_t data_file_bytes, size_t* dropped);

 private:
  uint32_t page_size_;
  L3SlotAllocator slots_;
  std::unordered_map<L3Key, L3Entry> entries_;
};

}  // namespace k25
