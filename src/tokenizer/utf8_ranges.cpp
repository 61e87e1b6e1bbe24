#include "tokenizer/utf8_ranges.h"

#include <algorithm>
#include <string>

#include "tokenizer/unicode.h"

namespace k25 {

namespace {
constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
}  // namespace

std::vector<std::pair<char32_t, char32_t>> normalize_code_point_ranges(
    std::vector<std::pair<char32_t, char32_t>> ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<std::pair<char32_t, char32_t>> complement;
    char32_t next = 0;
    for (const auto& r : merged) {
      if (r.first > next) complement.emplace_back(next, r.first - 1);
      next = r.second + 1;
    }
    if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
    merged = std::move(complement);
  }
  std::vector<std::pair<char32_t, char32_t>> out;
  for (const auto& [lo, hi] : merged) {
    if (hi < kSurrogateLo || lo > kSurrogateHi) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < kSurrogateLo) out.emplace_back(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) out.emplace_back(kSurrogateHi + 1, hi);
  }
  return out;
}

void utf8_patterns(char32_t lo, char32_t hi, std::vector<Utf8Pattern>& out) {
  // First split where the encoded length changes.
  for (const char32_t boundary : {char32_t{0x7F}, char32_t{0x7FF}, char32_t{0xFFFF}}) {
    if (lo <= boundary && boundary < hi) {
      utf8_patterns(lo, boundary, out);
      utf8_patterns(boundary + 1, hi, out);
      return;
    }
  }
  std::string lo_bytes, hi_bytes;
  unicode::append_utf8(lo_bytes, lo);
  unicode::append_utf8(hi_bytes, hi);
  const size_t n = lo_bytes.size();
  // Then split until every trailing byte spans its whole range (0x80..0xBF) wherever a leading
  // byte differs, so that the pattern is a plain product of byte ranges.
  for (size_t i = 1; i < n; ++i) {
    const char32_t mask = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        utf8_patterns(lo, lo | mask, out);
        utf8_patterns((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        utf8_patterns(lo, (hi & ~mask) - 1, out);
        utf8_patterns(hi & ~mask, hi, out);
        return;
      }
    }
  }
  Utf8Pattern pattern;
  for (size_t i = 0; i < n; ++i) {
    pattern.push_back({static_cast<uint8_t>(lo_bytes[i]), static_cast<uint8_t>(hi_bytes[i])});
  }
  out.push_back(std::move(pattern));
}

}  // namespace k25
