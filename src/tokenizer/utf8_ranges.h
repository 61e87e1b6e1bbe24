// Code point ranges as UTF-8 byte patterns: [lo, hi] becomes a few sequences of byte ranges
// whose concatenations are exactly the encodings of lo..hi. This lets a grammar over characters
// run on bytes.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace k25 {

struct ByteRange {
  uint8_t lo, hi;
  bool operator==(const ByteRange&) const = default;
};
using Utf8Pattern = std::vector<ByteRange>;  // one byte range per encoded byte

// Sorted, merged, surrogates (U+D800..U+DFFF) removed; `negated` complements over U+0000..U+10FFFF.
std::vector<std::pair<char32_t, char32_t>> normalize_code_point_ranges(
    std::vector<std::pair<char32_t, char32_t>> ranges, bool negated);

// Appends the patterns of [lo, hi] (no surrogates inside) to `out`.
void utf8_patterns(char32_t lo, char32_t hi, std::vector<Utf8Pattern>& out);

}  // namespace k25
