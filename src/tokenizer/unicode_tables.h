// Sorted, non-overlapping code point ranges for the Unicode classes the pre-tokenisers use
// (generated into unicode_tables.cpp by scripts/gen-unicode-tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

namespace k25::unicode {

struct CodepointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Whether cp lies in one of the `count` sorted ranges of `table`.
bool in_ranges(const CodepointRange* table, size_t count, uint32_t cp);

extern const CodepointRange kLetterRanges[];  // general category L* (\p{L})
extern const size_t kLetterRangesCount;
extern const CodepointRange kNumberRanges[];  // general category N* (\p{N})
extern const size_t kNumberRangesCount;
extern const CodepointRange kWhitespaceRanges[];  // White_Space property (\s)
extern const size_t kWhitespaceRangesCount;
extern const CodepointRange kMarkRanges[];  // general category M* (\p{M})
extern const size_t kMarkRangesCount;
extern const CodepointRange kPunctuationRanges[];  // general category P* (\p{P})
extern const size_t kPunctuationRangesCount;
extern const CodepointRange kUpperTitleRanges[];  // Lu and Lt
extern const size_t kUpperTitleRangesCount;
extern const CodepointRange kLowercaseRanges[];  // Ll
extern const size_t kLowercaseRangesCount;

}  // namespace k25::unicode
