#include "model/tokenizer_pretokenizer.h"

#include <cstdint>

#include "model/unicode.h"
#include "util/error.h"

namespace k25 {
namespace {

using unicode::is_letter;
using unicode::is_number;
using unicode::is_whitespace;

bool is_other(uint32_t cp) {
  return !is_whitespace(cp) && !is_letter(cp) && !is_number(cp);
}
bool is_newline(uint32_t cp) {
  return cp == '\r' || cp == '\n';
}
uint32_t ascii_lower(uint32_t cp) {
  return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

// Matches the regex alternatives at one position of a decoded text.
class Matcher {
 public:
  Matcher(PreTokenizerKind kind, const std::vector<uint32_t>& cps) : kind_(kind), cps_(cps) {}

  // End (exclusive, in code points) of the piece that starts at i.
  size_t match(size_t i) const {
    if (size_t end = contraction(i)) return end;
    return kind_ == PreTokenizerKind::Gpt2 ? match_gpt2(i) : match_llama3(i);
  }

 private:
  uint32_t at(size_t i) const { return i < cps_.size() ? cps_[i] : 0xFFFFFFFF; }

  template <typename Pred>
  size_t run(size_t i, Pred pred, size_t max_len = SIZE_MAX) const {
    size_t j = i;
    while (j < cps_.size() && j - i < max_len && pred(cps_[j])) ++j;
    return j;
  }

  // 's|'t|'re|'ve|'m|'ll|'d, case-insensitive for the Llama 3 family.
  size_t contraction(size_t i) const {
    if (at(i) != '\'' || i + 1 >= cps_.size()) return 0;
    const bool fold = kind_ != PreTokenizerKind::Gpt2;
    auto c = [&](size_t k) { return fold ? ascii_lower(at(k)) : at(k); };
    const uint32_t a = c(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= cps_.size()) return 0;
    const uint32_t b = c(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  // \s+(?!\S)|\s+ at a whitespace code point: a run followed by non-space leaves its last
  // space for the next word, unless it is a single space.
  size_t whitespace_run(size_t i) const {
    const size_t j = run(i, is_whitespace);
    if (j == cps_.size() || j - i == 1) return j;
    return j - 1;
  }

  size_t match_gpt2(size_t i) const {
    const bool space = at(i) == ' ';
    for (auto pred : {is_letter, is_number, is_other}) {
      // " ?" then one or more of the class.
      const size_t start = space && pred(at(i + 1)) ? i + 1 : i;
      if (pred(at(start))) return run(start, pred);
    }
    return whitespace_run(i);
  }

  size_t match_llama3(size_t i) const {
    const uint32_t c = at(i);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (is_letter(c)) return run(i, is_letter);
    if (!is_newline(c) && !is_number(c) && is_letter(at(i + 1))) return run(i + 1, is_letter);
    // \p{N}{1,3} or \p{N}
    if (is_number(c)) return run(i, is_number, kind_ == PreTokenizerKind::Llama3 ? 3 : 1);
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    const size_t start = c == ' ' && is_other(at(i + 1)) ? i + 1 : i;
    if (is_other(at(start))) return run(run(start, is_other), is_newline);
    // \s*[\r\n]+: up to and including the last newline of the whitespace run.
    const size_t j = run(i, is_whitespace);
    for (size_t k = j; k > i; --k) {
      if (is_newline(cps_[k - 1])) return k;
    }
    return whitespace_run(i);
  }

  PreTokenizerKind kind_;
  const std::vector<uint32_t>& cps_;
};

}  // namespace

PreTokenizerKind pre_tokenizer_from_name(const std::string& name) {
  if (name == "gpt-2" || name == "default" || name == "mpt" || name == "olmo" || name == "phi-2") {
    return PreTokenizerKind::Gpt2;
  }
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "smaug-bpe") {
    return PreTokenizerKind::Llama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizerKind::Qwen2;
  fail("unsupported BPE pre-tokenizer '", name, "' (tokenizer.ggml.pre)");
}

const char* pre_tokenizer_pattern(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::Gpt2:
      return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
    case PreTokenizerKind::Llama3:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    case PreTokenizerKind::Qwen2:
      return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  }
  return "";
}

std::vector<std::string_view> pre_tokenize(PreTokenizerKind kind, std::string_view text) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;  // byte offset of each code point, plus the end
  cps.reserve(text.size());
  offsets.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(text, pos);
    cps.push_back(step.codepoint);
    offsets.push_back(pos);
    pos += step.length;
  }
  offsets.push_back(text.size());

  std::vector<std::string_view> pieces;
  const Matcher matcher(kind, cps);
  for (size_t i = 0; i < cps.size();) {
    const size_t end = matcher.match(i);
    pieces.push_back(text.substr(offsets[i], offsets[end] - offsets[i]));
    i = end;
  }
  return pieces;
}

}  // namespace k25
