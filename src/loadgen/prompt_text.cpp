#include "loadgen/prompt_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <random>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace k25::loadgen {

namespace {

// Words per token for the approximation without a tokenizer (English text, Llama-style vocab).
constexpr double kWordsPerToken = 0.75;

int count_words(std::string_view text) {
  int words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// Words with the whitespace before them, so that concatenating pieces gives back the text.
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    const size_t word = j;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    if (j > word) words.push_back(text.substr(i, j - i));
    i = j;
  }
  return words;
}

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 0;  // continuation byte or invalid
}

}  // namespace

std::string trim_broken_utf8(std::string text) {
  size_t start = 0;
  while (start < text.size() && utf8_length(static_cast<unsigned char>(text[start])) == 0) ++start;
  text.erase(0, start);
  // Find the lead byte of the last character and check that it is complete.
  size_t lead = text.size();
  while (lead > 0 && text.size() - lead < 4) {
    --lead;
    if (utf8_length(static_cast<unsigned char>(text[lead])) != 0) {
      if (lead + utf8_length(static_cast<unsigned char>(text[lead])) > text.size()) {
        text.erase(lead);
      }
      break;
    }
  }
  return text;
}

PromptBuilder::PromptBuilder(std::string source_text, const Tokenizer* tokenizer)
    : tokenizer_(tokenizer) {
  if (tokenizer_) {
    specials_ = static_cast<int>(tokenizer_->encode("a", true, false).size() -
                                 tokenizer_->encode("a", false, false).size());
    for (TokenId id : tokenizer_->encode(source_text, false, false)) {
      pieces_.push_back(tokenizer_->token_to_piece(id, false));
    }
  } else {
    pieces_ = split_words(source_text);
  }
  if (pieces_.empty()) fail("the prompt text source is empty");
}

int PromptBuilder::count(std::string_view text) const {
  if (tokenizer_) return static_cast<int>(tokenizer_->encode(text, true, false).size());
  return static_cast<int>(std::lround(count_words(text) / kWordsPerToken));
}

std::string PromptBuilder::window(size_t start, int units) const {
  std::string text;
  for (int i = 0; i < units; ++i) {
    const size_t at = (start + i) % pieces_.size();
    if (at == 0 && i > 0) text += '\n';  // the source wraps around: keep its ends apart
    text += pieces_[at];
  }
  // A prompt starts with its first word, not with the space before it (the SentencePiece space
  // prefix would add it again) nor in the middle of a character.
  const size_t first = text.find_first_not_of(" \n\t\r");
  text.erase(0, first == std::string::npos ? text.size() : first);
  return trim_broken_utf8(std::move(text));
}

BuiltPrompt PromptBuilder::build(int n_tokens, uint64_t offset) const {
  if (n_tokens < 1) fail("a prompt needs at least one token, asked for ", n_tokens);
  BuiltPrompt best;
  int best_miss = -1;
  if (!tokenizer_) {
    const int words = std::max(1, static_cast<int>(std::lround(n_tokens * kWordsPerToken)));
    best.text = window(offset % pieces_.size(), words);
    best.tokens = count(best.text);
    return best;
  }
  // Re-tokenising a cut can merge or split at the edges; step the piece count towards the target
  // and, if it oscillates, move the start by one piece.
  for (int shift = 0; shift < 4; ++shift) {
    const size_t start = (offset + shift) % pieces_.size();
    int units = std::max(1, n_tokens - specials_);
    for (int step = 0; step < 6; ++step) {
      BuiltPrompt p;
      p.text = window(start, units);
      p.tokens = count(p.text);
      const int miss = std::abs(p.tokens - n_tokens);
      if (best_miss < 0 || miss < best_miss) {
        best = p;
        best_miss = miss;
      }
      if (miss == 0) return best;
      const int next = std::max(1, units + (n_tokens - p.tokens));
      if (next == units) break;
      units = next;
    }
  }
  return best;
}

std::string generated_words(size_t n_words, uint64_t seed) {
  static const char* const kWords[] = {
      "the",    "little", "dog",   "ran",   "to",    "a",      "big",   "tree",   "and",
      "saw",    "bird",   "sing",  "in",    "park",  "with",   "her",   "friend", "they",
      "played", "all",    "day",   "sun",   "was",   "warm",   "happy", "girl",   "boy",
      "found",  "red",    "ball",  "under", "table", "mother", "said",  "look",   "at",
      "sky",    "blue",   "cat",   "slept", "on",    "soft",   "bed",   "after",  "lunch",
      "went",   "home",   "river", "cold",  "water", "fish",   "swam",  "fast",   "slow"};
  constexpr size_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  std::mt19937_64 rng(seed);
  std::string text;
  for (size_t i = 0; i < n_words; ++i) {
    std::string word = kWords[rng() % kCount];
    const bool sentence_start = i == 0 || text.back() == '.';
    if (sentence_start) word[0] = static_cast<char>(std::toupper(word[0]));
    if (i > 0) text += ' ';
    text += word;
    if (rng() % 10 == 0) text += '.';
  }
  if (!text.empty() && text.back() != '.') text += '.';
  return text;
}

}  // namespace k25::loadgen
