// Random sentences of a compiled Grammar, for tests: a derivation that picks alternatives and
// bytes at random and, past a depth, the alternative with the shortest completion.
#pragma once

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/grammar.h"

namespace k25::testing {

class GrammarWalk {
 public:
  explicit GrammarWalk(const Grammar& g) : g_(g), shortest_(g.rules.size(), kFar) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.rules.size(); ++r)
        for (uint32_t start : g.rules[r].alternatives) {
          const size_t n = length_from(start);
          if (n < shortest_[r]) shortest_[r] = n, changed = true;
        }
    }
  }

  std::string sentence(std::mt19937_64& rng, int max_depth = 12) {
    std::string out;
    expand(g_.root, 0, max_depth, rng, out);
    return out;
  }

 private:
  static constexpr size_t kFar = std::numeric_limits<size_t>::max() / 4;
  const Grammar& g_;
  std::vector<size_t> shortest_;

  size_t length_from(uint32_t pos) const {
    size_t n = 0;
    for (; g_.elements[pos].kind != GrammarElement::Kind::End; ++pos)
      n += g_.elements[pos].kind == GrammarElement::Kind::Bytes ? 1
                                                                : shortest_[g_.elements[pos].index];
    return std::min(n, kFar);
  }

  void expand(uint32_t rule, int depth, int max_depth, std::mt19937_64& rng, std::string& out) {
    const auto& alternatives = g_.rules[rule].alternatives;
    uint32_t start = alternatives[rng() % alternatives.size()];
    if (depth >= max_depth) {
      for (uint32_t s : alternatives)
        if (length_from(s) < length_from(start)) start = s;
    }
    for (uint32_t pos = start; g_.elements[pos].kind != GrammarElement::Kind::End; ++pos) {
      const GrammarElement& e = g_.elements[pos];
      if (e.kind == GrammarElement::Kind::Rule) {
        expand(e.index, depth + 1, max_depth, rng, out);
        continue;
      }
      std::vector<uint8_t> bytes;
      for (int b = 0; b < 256; ++b)
        if (g_.byte_sets[e.index].has(static_cast<uint8_t>(b)))
          bytes.push_back(static_cast<uint8_t>(b));
      out += static_cast<char>(bytes[rng() % bytes.size()]);
    }
  }
};

}  // namespace k25::testing
