// R-FP2: a 64-bit SimHash of the first code points of a prompt. Similar texts get signatures a
// small Hamming distance apart, unrelated texts about 32 bits apart. Linear in the input, no
// allocation: it runs on every request before scheduling.
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>

namespace k25 {

inline constexpr int kSimHashCodePoints = 256;

// Features are overlapping 3-grams of code points (ASCII letters folded to lower case, runs of
// whitespace folded to one space). Invalid UTF-8 bytes count as U+FFFD, one code point each.
// Only the first `max_code_points` code points are read.
uint64_t simhash64(std::string_view utf8, int max_code_points = kSimHashCodePoints);

inline int hamming_distance(uint64_t a, uint64_t b) {
  return std::popcount(a ^ b);
}

}  // namespace k25
