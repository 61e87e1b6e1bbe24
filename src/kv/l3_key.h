// How the engine names L3 pages: the DiskStore takes opaque 64-bit keys; this packs a stream
// (a session or sequence: a hash of its id) into the high 40 bits and the page index within the
// stream (first position / page_tokens) into the low 24 bits, so all of a session's pages can be
// found again after a restart by scanning DiskStore::keys() for its stream.
#pragma once

#include <cstdint>

#include "kv/l3_page_table.h"

namespace k25 {

inline constexpr int kL3PageIndexBits = 24;
inline constexpr uint64_t kL3PageIndexMask = (uint64_t{1} << kL3PageIndexBits) - 1;

// `stream` is truncated to 40 bits; `page_index` must be below 2^24 (16M pages).
constexpr L3Key l3_page_key(uint64_t stream, uint32_t page_index) {
  return (stream << kL3PageIndexBits) | (page_index & kL3PageIndexMask);
}
constexpr uint64_t l3_key_stream(L3Key key) {
  return key >> kL3PageIndexBits;
}
constexpr uint32_t l3_key_page(L3Key key) {
  return static_cast<uint32_t>(key & kL3PageIndexMask);
}

}  // namespace k25
