// Prompt text of a known token count, cut from real text (a file) or from generated words. With a
// tokenizer the count is exact as the server's tokenizer sees it (BOS included when the vocabulary
// adds one); without one, tokens are approximated as 4/3 of the words.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace k25 {
class Tokenizer;
}

namespace k25::loadgen {

struct BuiltPrompt {
  std::string text;
  int tokens = 0;  // as counted (exact with a tokenizer)
};

class PromptBuilder {
 public:
  // `tokenizer` may be null (word approximation); when given it must outlive the builder.
  PromptBuilder(std::string source_text, const Tokenizer* tokenizer);

  bool exact() const { return tokenizer_ != nullptr; }
  // Token count of a text, as sent (specials included when the vocabulary adds them).
  int count(std::string_view text) const;
  // A text of n tokens starting at position `offset` (taken modulo the source) of the source; the
  // source wraps around for long prompts. Exact when possible; else the closest count found.
  BuiltPrompt build(int n_tokens, uint64_t offset) const;

 private:
  std::string window(size_t start, int units) const;

  const Tokenizer* tokenizer_;
  int specials_ = 0;                 // tokens the tokenizer adds around any text (BOS)
  std::vector<std::string> pieces_;  // source as token pieces, or as words with their spaces
};

// A deterministic stream of common English words in sentences, for when no text file is given.
std::string generated_words(size_t n_words, uint64_t seed);

// Drops a broken UTF-8 sequence at either end (a cut between a character's bytes).
std::string trim_broken_utf8(std::string text);

}  // namespace k25::loadgen
