// GBNF text to a syntax tree (rules of alternatives of items). grammar_compiler.cpp lowers the
// tree to the byte-level Grammar; this file only knows the syntax.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k25 {

struct GbnfItem;
using GbnfSequence = std::vector<GbnfItem>;
using GbnfAlternatives = std::vector<GbnfSequence>;

struct GbnfItem {
  enum class Kind { Literal, CharClass, RuleRef, Group };
  Kind kind = Kind::Literal;
  std::u32string literal;                             // Literal: code points
  std::vector<std::pair<char32_t, char32_t>> ranges;  // CharClass: inclusive code point ranges
  bool negated = false;                               // CharClass: [^...] (and "." as [^])
  std::string name;                                   // RuleRef
  GbnfAlternatives group;                             // Group: ( ... )
  int min = 1, max = 1;                               // repetition; max < 0: unbounded
  int line = 0, column = 0;                           // where the item starts (1-based)
};

struct GbnfRule {
  std::string name;
  GbnfAlternatives alternatives;
  int line = 0, column = 0;
};

// Throws k25::Error "grammar: line L, column C: <problem>" on a syntax error.
std::vector<GbnfRule> parse_gbnf(std::string_view text);

}  // namespace k25
