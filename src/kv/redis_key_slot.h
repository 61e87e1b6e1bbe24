// Redis Cluster's key -> hash slot mapping (the cluster specification): CRC-16/XMODEM of the key,
// or of the part between the first '{' and the next '}' when that part is not empty (a hash tag),
// modulo 16384. The shared KV tier's keys carry no braces, so every page key hashes whole and the
// pages of one chain spread over the shards (docs/kv-cache.md says why).
#pragma once

#include <cstdint>
#include <string_view>

namespace k25 {

inline constexpr int kRedisClusterSlots = 16384;

uint16_t redis_crc16(std::string_view bytes);  // CRC-16/XMODEM (poly 0x1021, init 0)
int redis_key_slot(std::string_view key);

}  // namespace k25
