// The L3 index journal's replay (kv/l3_journal.h) over a valid header and records built from the
// input (each 36-byte piece gets its correct CRC, so the fuzzer reaches the records' meaning; a
// shorter rest is a torn tail). Any input replays into a consistent table: every page within the
// capacity, the slots in use exactly those of the pages, the recency order holding each page
// once, and every byte either applied or counted as ignored. A damaged file is a k25::Error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/crc32c.h"
#include "core/error.h"
#include "kv/l3_journal.h"

namespace {

constexpr uint32_t kPage = 4096;
constexpr uint64_t kSlots = 64, kTag = 1;

std::string header() {
  std::string h("K25L3JNL", 8);
  const uint32_t version = 2, page = kPage, zero = 0;
  h.append(reinterpret_cast<const char*>(&version), 4);
  h.append(reinterpret_cast<const char*>(&page), 4);
  h.append(reinterpret_cast<const char*>(&kTag), 8);
  h.append(reinterpret_cast<const char*>(&zero), 4);
  const uint32_t crc = k25::crc32c(h.data(), h.size());
  h.append(reinterpret_cast<const char*>(&crc), 4);
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string journal = header();
  const char* in = reinterpret_cast<const char*>(data);
  size_t at = 0;
  for (; at + 36 <= size; at += 36) {
    std::string record(in + at, 36);
    // Mostly the known ops (1-3, and 4: unknown), mostly small slot counts.
    if (const auto op = static_cast<uint8_t>(record[0]); op == 0 || op > 4)
      record[0] = static_cast<char>(1 + op % 4);
    if (const auto n = static_cast<uint8_t>(record[4]); n > 3) record[4] = static_cast<char>(n % 4);
    const uint32_t crc = k25::crc32c(record.data(), record.size());
    record.append(reinterpret_cast<const char*>(&crc), 4);
    journal += record;
  }
  journal.append(in + at, size - at);
  try {
    const k25::L3JournalReplay r =
        k25::L3Journal::replay_bytes(journal, "fuzz", kSlots, kPage, kTag, kSlots * kPage);
    uint64_t used = 0;
    for (k25::L3Key key : r.table.keys()) {
      const k25::L3Entry* e = r.table.find(key);
      if (!e || e->extent.first_slot + e->extent.n_slots > kSlots) __builtin_trap();
      used += e->extent.n_slots;
    }
    if (used != kSlots - r.table.slots().slots_free()) __builtin_trap();
    if (r.table.keys_by_recency().size() != r.table.size()) __builtin_trap();
    if (32 + r.records * 40 + r.ignored_bytes != journal.size()) __builtin_trap();
  } catch (const k25::Error&) {
    __builtin_trap();  // the header is valid: records never make the replay throw
  }
  return 0;
}
