// UTF-8 decoding/encoding and the Unicode character classes the tokenisers need.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace k25::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// One step of UTF-8 decoding at s[pos].
struct Utf8Step {
  uint32_t codepoint;  // kReplacementChar when !valid
  size_t length;       // bytes consumed (>= 1 while pos < s.size())
  bool valid;
  bool truncated;  // the bytes so far are a valid prefix but the input ends before the character
};

// Decodes the character at s[pos]. Invalid input consumes its maximal valid subpart (at least one
// byte), as the Unicode standard recommends for U+FFFD substitution.
Utf8Step decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of cp (which must be a scalar value) to out.
void append_utf8(std::string& out, uint32_t cp);

bool is_letter(uint32_t cp);          // \p{L}
bool is_number(uint32_t cp);          // \p{N}
bool is_whitespace(uint32_t cp);      // \s (White_Space)
bool is_mark(uint32_t cp);            // \p{M}
bool is_punctuation(uint32_t cp);     // \p{P}
bool is_upper_or_title(uint32_t cp);  // \p{Lu} or \p{Lt}
bool is_lowercase(uint32_t cp);       // \p{Ll}

}  // namespace k25::unicode
