#include "tokenizer/unicode.h"

#include <algorithm>

#include "tokenizer/unicode_tables.h"

namespace k25::unicode {

bool in_ranges(const CodepointRange* table, size_t count, uint32_t cp) {
  const CodepointRange* end = table + count;
  // First range whose last >= cp.
  const CodepointRange* it = std::lower_bound(
      table, end, cp, [](const CodepointRange& r, uint32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

Utf8Step decode_utf8(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return {lead, 1, true, false};
  size_t need;
  uint32_t cp;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    cp = lead & 0x0F;
    if (lead == 0xE0) lo = 0xA0;  // no overlongs
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    cp = lead & 0x07;
    if (lead == 0xF0) lo = 0x90;  // no overlongs
    if (lead == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {kReplacementChar, 1, false, false};
  }
  size_t i = 1;
  for (; i <= need; ++i) {
    if (pos + i >= s.size()) return {kReplacementChar, i, false, true};
    const uint8_t b = byte(pos + i);
    const uint8_t min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {kReplacementChar, i, false, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need + 1, true, false};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, kLetterRangesCount, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, kNumberRangesCount, cp);
}

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(kWhitespaceRanges, kWhitespaceRangesCount, cp);
}

bool is_mark(uint32_t cp) {
  return cp >= 0x80 && in_ranges(kMarkRanges, kMarkRangesCount, cp);
}

bool is_punctuation(uint32_t cp) {
  return in_ranges(kPunctuationRanges, kPunctuationRangesCount, cp);
}

bool is_upper_or_title(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  return in_ranges(kUpperTitleRanges, kUpperTitleRangesCount, cp);
}

bool is_lowercase(uint32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  return in_ranges(kLowercaseRanges, kLowercaseRangesCount, cp);
}

}  // namespace k25::unicode
