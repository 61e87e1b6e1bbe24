#include "kv/shared_page_value.h"

#include <cstdio>
#include <cstring>

#include "core/crc32c.h"

namespace k25 {

std::string shared_page_key(std::string_view kv_namespace, uint64_t chain_key) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(chain_key));
  std::string key = "k25:kv:";
  key += kv_namespace;
  key += ':';
  key += hex;
  return key;
}

std::string encode_shared_page(uint64_t chain_key,
                               std::span<const std::span<const std::byte>> pieces) {
  size_t bytes = 0;
  for (const auto& piece : pieces) bytes += piece.size();
  std::string value;
  value.reserve(bytes + sizeof(uint32_t));
  uint32_t crc = crc32c(&chain_key, sizeof(chain_key));
  for (const auto& piece : pieces) {
    value.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    crc = crc32c_extend(crc, piece.data(), piece.size());
  }
  char tail[sizeof(uint32_t)];
  std::memcpy(tail, &crc, sizeof(crc));  // little-endian on every target k25 builds for
  value.append(tail, sizeof(tail));
  return value;
}

bool shared_page_intact(uint64_t chain_key, std::string_view value, size_t bytes) {
  if (value.size() != bytes + sizeof(uint32_t)) return false;
  uint32_t stored = 0;
  std::memcpy(&stored, value.data() + bytes, sizeof(stored));
  const uint32_t crc = crc32c_extend(crc32c(&chain_key, sizeof(chain_key)), value.data(), bytes);
  return crc == stored;
}

}  // namespace k25
