#include "kv/prefix_page_header.h"

#include <cstring>

namespace k25 {

namespace {
constexpr uint64_t kHeaderTag = 0x3130584650353260ull;  // "`25PFX01": the page format
}  // namespace

size_t prefix_page_header_bytes(int page_tokens) {
  return 2 * sizeof(uint64_t) + static_cast<size_t>(page_tokens) * sizeof(int32_t);
}

std::vector<std::byte> prefix_page_header(const CachedPage& page, int page_tokens) {
  std::vector<std::byte> bytes(prefix_page_header_bytes(page_tokens));
  std::memcpy(bytes.data(), &kHeaderTag, sizeof(uint64_t));
  std::memcpy(bytes.data() + sizeof(uint64_t), &page.parent, sizeof(uint64_t));
  std::memcpy(bytes.data() + 2 * sizeof(uint64_t), page.tokens,
              static_cast<size_t>(page_tokens) * sizeof(int32_t));
  return bytes;
}

}  // namespace k25
