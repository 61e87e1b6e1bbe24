// A context-free grammar over bytes: what constrained decoding (grammar_matcher.h) runs. It is
// compiled from GBNF text (compile_gbnf below; the supported syntax is in
// docs/constrained-decoding.md) or from a JSON schema (json_schema_grammar.h). Character classes
// are lowered to UTF-8 byte sequences, so the matcher works on bytes only and a token may end in
// the middle of a multi-byte character.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace k25 {

struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct GrammarElement {
  enum class Kind : uint8_t { End, Bytes, Rule };
  Kind kind = Kind::End;
  uint32_t index = 0;  // Bytes: into Grammar::byte_sets; Rule: into Grammar::rules
};

struct Grammar {
  struct Rule {
    std::string name;  // the GBNF name; generated rules get "<rule>~<n>"
    // Offsets into `elements` where each alternative starts; every alternative ends with an End.
    std::vector<uint32_t> alternatives;
  };
  std::vector<GrammarElement> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<Rule> rules;
  uint32_t root = 0;
};

// Bounds that keep a hostile grammar from exhausting memory or time at compile or match time.
inline constexpr size_t kMaxGrammarTextBytes = size_t{1} << 20;
inline constexpr size_t kMaxGrammarElements = size_t{1} << 20;
inline constexpr int kMaxGrammarRepetition = 10000;

// Compiles GBNF text whose start rule is `root`. Throws k25::Error naming the line, the column
// and the construct: syntax errors, undefined or duplicate rules, left recursion, rules that can
// never finish, and grammars over the size limits above.
std::shared_ptr<const Grammar> compile_gbnf(std::string_view text);

}  // namespace k25
