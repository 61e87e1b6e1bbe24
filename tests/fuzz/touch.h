// Fuzz helper: reads the first and last byte of a range, so AddressSanitizer reports any view a
// parser returns that escapes its input.
#pragma once

#include <cstddef>
#include <cstdint>

namespace k25::fuzz {

inline volatile uint8_t g_sink;

inline void touch(const void* p, size_t n) {
  if (n == 0) return;
  const auto* b = static_cast<const uint8_t*>(p);
  g_sink = static_cast<uint8_t>(b[0] ^ b[n - 1]);
}

}  // namespace k25::fuzz
