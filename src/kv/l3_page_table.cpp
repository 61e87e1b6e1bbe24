#include "kv/l3_page_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "util/crc32c.h"
#include "util/error.h"

namespace k25 {
namespace {

constexpr char kMagic[8] = {'K', '2', '5', 'L', '3', 'I', 'D', 'X'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;
constexpr size_t kEntryBytes = 8 + 8 + 4 + 4 + 8;

template <typename T>
void put_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 is little-endian, the format's order
  out.append(bytes, sizeof(T));
}

template <typename T>
T get_le(const std::string& in, size_t& pos) {
  T v;
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("L3 index ", path, ": write failed: ", std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

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
  if (extent.n_slots == 0) return false;
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
  return it == entries_.end() ? nullptr : &it->second;
}

std::optional<L3Entry> L3PageTable::put(L3Key key, const L3Entry& entry) {
  auto [it, inserted] = entries_.try_emplace(key, entry);
  if (inserted) return std::nullopt;
  const L3Entry old = it->second;
  it->second = entry;
  return old;
}

std::optional<L3Entry> L3PageTable::erase(L3Key key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const L3Entry old = it->second;
  entries_.erase(it);
  return old;
}

std::vector<L3Key> L3PageTable::keys() const {
  std::vector<L3Key> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(key);
  std::sort(out.begin(), out.end());
  return out;
}

void L3PageTable::save(const std::string& path, uint64_t content_tag) const {
  std::string data;
  data.reserve(kHeaderBytes + entries_.size() * kEntryBytes + 4);
  data.append(kMagic, sizeof(kMagic));
  put_le<uint32_t>(data, kVersion);
  put_le<uint32_t>(data, page_size_);
  put_le<uint64_t>(data, content_tag);
  put_le<uint64_t>(data, slots_.slots_total());
  put_le<uint64_t>(data, entries_.size());
  for (L3Key key : keys()) {  // sorted: the same table always gives the same file
    const L3Entry& e = entries_.at(key);
    put_le<uint64_t>(data, key);
    put_le<uint64_t>(data, e.extent.first_slot);
    put_le<uint32_t>(data, e.extent.n_slots);
    put_le<uint32_t>(data, e.crc);
    put_le<uint64_t>(data, e.length);
  }
  put_le<uint32_t>(data, crc32c(data.data(), data.size()));

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("L3 index ", tmp, ": cannot create: ", std::strerror(errno));
  try {
    write_all(fd, data, tmp);
    if (::fsync(fd) != 0) fail("L3 index ", tmp, ": fsync failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("L3 index ", path, ": rename failed: ", std::strerror(err));
  }
  // The rename is durable only once the directory entry is.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

L3PageTable L3PageTable::load(const std::string& path, uint64_t n_slots, uint32_t page_size,
                              uint64_t content_tag, uint64_t data_file_bytes, size_t* dropped) {
  *dropped = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("L3 index ", path, ": cannot open: ", std::strerror(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < kHeaderBytes + 4 || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    fail("L3 index ", path, ": not an index file (", data.size(), " bytes, bad magic)");
  size_t tail = data.size() - 4;
  if (get_le<uint32_t>(data, tail) != crc32c(data.data(), data.size() - 4))
    fail("L3 index ", path, ": checksum mismatch (file damaged or half-written)");
  size_t pos = sizeof(kMagic);
  const auto version = get_le<uint32_t>(data, pos);
  const auto file_page_size = get_le<uint32_t>(data, pos);
  const auto file_tag = get_le<uint64_t>(data, pos);
  get_le<uint64_t>(data, pos);  // slot count when written: the current capacity decides
  const auto n_entries = get_le<uint64_t>(data, pos);
  if (version != kVersion) fail("L3 index ", path, ": version ", version, ", expected ", kVersion);
  if (file_page_size != page_size)
    fail("L3 index ", path, ": page size ", file_page_size, ", configured ", page_size);
  if (file_tag != content_tag)
    fail("L3 index ", path, ": content tag ", file_tag, " is not this store's ", content_tag,
         " (another model or KV layout)");
  if (n_entries != (data.size() - kHeaderBytes - 4) / kEntryBytes ||
      data.size() != kHeaderBytes + n_entries * kEntryBytes + 4)
    fail("L3 index ", path, ": ", n_entries, " entries do not match the file size ", data.size());

  L3PageTable table(n_slots, page_size);
  for (uint64_t i = 0; i < n_entries; ++i) {
    const auto key = get_le<uint64_t>(data, pos);
    L3Entry e;
    e.extent.first_slot = get_le<uint64_t>(data, pos);
    e.extent.n_slots = get_le<uint32_t>(data, pos);
    e.crc = get_le<uint32_t>(data, pos);
    e.length = get_le<uint64_t>(data, pos);
    const uint64_t want_slots = (e.length + page_size - 1) / page_size;
    if (e.length == 0 || e.extent.n_slots != want_slots)
      fail("L3 index ", path, ": entry ", i, " has length ", e.length, " in ", e.extent.n_slots,
           " slots");
    const uint64_t end_slot = e.extent.first_slot + e.extent.n_slots;
    if (end_slot > n_slots || end_slot * page_size > data_file_bytes) {
      ++*dropped;
      continue;
    }
    if (table.find(key)) fail("L3 index ", path, ": key ", key, " appears twice");
    if (!table.slots_.claim(e.extent))
      fail("L3 index ", path, ": entry ", i, " overlaps another at slot ", e.extent.first_slot);
    table.entries_.emplace(key, e);
  }
  return table;
}

}  // namespace k25
