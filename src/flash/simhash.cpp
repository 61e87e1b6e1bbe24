#include "flash/simhash.h"

#include <array>

namespace k25 {

namespace {

// Decodes one code point at s[i], advancing i; malformed sequences yield U+FFFD and consume
// one byte.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  }
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += len;
  return cp;
}

uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == '\t' || cp == '\n' || cp == '\r' || cp == '\f' || cp == '\v') return ' ';
  return cp;
}

// splitmix64 finaliser: a well-mixed 64-bit hash of one 3-gram.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t simhash64(std::string_view utf8, int max_code_points) {
  std::array<int, 64> votes{};
  const auto vote = [&votes](const uint32_t* w) {
    const uint64_t h = mix((uint64_t{w[0]} << 42) ^ (uint64_t{w[1]} << 21) ^ uint64_t{w[2]});
    for (int b = 0; b < 64; ++b) votes[b] += (h >> b & 1) ? 1 : -1;
  };
  uint32_t window[3] = {0, 0, 0};
  int filled = 0, n = 0, n_features = 0;
  size_t i = 0;
  while (i < utf8.size() && n < max_code_points) {
    const uint32_t cp = fold(next_code_point(utf8, i));
    ++n;
    if (cp == ' ' && filled > 0 && window[2] == ' ') continue;  // a whitespace run counts once
    window[0] = window[1];
    window[1] = window[2];
    window[2] = cp;
    if (filled < 3) ++filled;
    if (filled == 3) {
      vote(window);
      ++n_features;
    }
  }
  if (n_features == 0 && filled > 0) vote(window);  // shorter than one 3-gram
  uint64_t out = 0;
  for (int b = 0; b < 64; ++b) {
    if (votes[b] > 0) out |= uint64_t{1} << b;
  }
  return out;
}

}  // namespace k25
