// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), as used by iSCSI, ext4 and
// Btrfs: the checksum of every L3 KV page and of the L3 index file. Uses the SSE4.2 crc32
// instruction when the build targets it (every x86-64-v3 CPU), a table otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace k25 {

// Continues a CRC over `size` more bytes: crc32c_extend(crc32c(a), b) == crc32c(a ++ b).
// The running value is the finished CRC (pre- and post-inversion are applied inside).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(const void* data, size_t size) {
  return crc32c_extend(0, data, size);
}

// The table-driven path, always available; the tests check the two paths agree.
uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size);

}  // namespace k25
