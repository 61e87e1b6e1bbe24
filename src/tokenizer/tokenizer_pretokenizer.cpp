#include "tokenizer/tokenizer_pretokenizer.h"

#include <cstdint>
#include <iterator>
#include <utility>

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

namespace k25 {
namespace {

using unicode::CodepointRange;
using unicode::is_letter;
using unicode::is_mark;
using unicode::is_number;
using unicode::is_whitespace;

// Past the end of a piece: no class contains it.
constexpr uint32_t kNone = 0xFFFFFFFF;

bool is_other(uint32_t cp) {  // [^\s\p{L}\p{N}]
  return cp != kNone && !is_whitespace(cp) && !is_letter(cp) && !is_number(cp);
}
bool is_letter_or_mark(uint32_t cp) {  // [\p{L}\p{M}]
  return is_letter(cp) || is_mark(cp);
}
bool is_other_no_mark(uint32_t cp) {  // [^\s\p{L}\p{M}\p{N}]
  return is_other(cp) && !is_mark(cp);
}
bool is_newline(uint32_t cp) {
  return cp == '\r' || cp == '\n';
}
bool is_newline_or_slash(uint32_t cp) {
  return is_newline(cp) || cp == '/';
}
bool is_prefix(uint32_t cp) {  // [^\r\n\p{L}\p{N}]
  return cp != kNone && !is_newline(cp) && !is_letter(cp) && !is_number(cp);
}
// Tekken's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}]: Lm and Lo (letters
// that are neither upper/title nor lower case) and marks are in both.
bool is_tekken_upper(uint32_t cp) {
  return is_mark(cp) || (is_letter(cp) && !unicode::is_lowercase(cp));
}
bool is_tekken_lower(uint32_t cp) {
  return is_mark(cp) || (is_letter(cp) && !unicode::is_upper_or_title(cp));
}
bool is_ascii_digit(uint32_t cp) {
  return cp >= '0' && cp <= '9';
}

// DeepSeek LLM's explicit letter class (cased letters of the scripts it lists), from its regex
// \s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕ...]+.
constexpr CodepointRange kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// [!-/:-~！-／：-～‘-‟　-。] (ASCII punctuation and letters, fullwidth forms, quotes, CJK marks).
constexpr CodepointRange kDeepseekPunctuation[] = {
    {0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// [一-龥ࠀ-一가-퟿]
constexpr CodepointRange kDeepseekCjk[] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

// Falcon's [\p{P}\$\+<=>\^~\|`]: Unicode punctuation plus the ASCII symbols that Rust's
// is_ascii_punctuation counts (HF's Punctuation pre-tokenizer).
bool is_falcon_punctuation(uint32_t cp) {
  switch (cp) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
    case '`':
      return true;
    default:
      return cp != kNone && unicode::is_punctuation(cp);
  }
}

// One piece of the text being split: code points [begin, end) of the whole text. Regex
// anchors and look-aheads see the piece's end as the end of the input, as in HF.
class Piece {
 public:
  Piece(const std::vector<uint32_t>& cps, size_t begin, size_t end)
      : cps_(cps), begin_(begin), end_(end) {}
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  uint32_t at(size_t i) const { return i < end_ ? cps_[i] : kNone; }

  // End of the run of code points from i that satisfy pred (at most max_len of them).
  template <typename Pred>
  size_t run(size_t i, Pred pred, size_t max_len = SIZE_MAX) const {
    size_t j = i;
    while (j < end_ && j - i < max_len && pred(cps_[j])) ++j;
    return j;
  }

 private:
  const std::vector<uint32_t>& cps_;
  size_t begin_, end_;
};

// 's|'t|'re|'ve|'m|'ll|'d (ASCII case-insensitive when fold): end of the match or 0.
size_t contraction(const Piece& p, size_t i, bool fold) {
  if (p.at(i) != '\'') return 0;
  auto c = [&](size_t k) {
    const uint32_t cp = p.at(k);
    return fold && cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  };
  const uint32_t a = c(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  const uint32_t b = c(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace code point: a run followed by non-space leaves its last space
// for the next word, unless it is a single space.
size_t whitespace_run(const Piece& p, size_t i) {
  const size_t j = p.run(i, is_whitespace);
  if (j == p.end() || j - i == 1) return j;
  return j - 1;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at a whitespace code point: up to and including the last newline of
// the run, else as whitespace_run.
size_t whitespace_newline_run(const Piece& p, size_t i) {
  const size_t j = p.run(i, is_whitespace);
  for (size_t k = j; k > i; --k) {
    if (is_newline(p.at(k - 1))) return k;
  }
  return whitespace_run(p, i);
}

// " ?X+" then the run of `tail`: end of the match or 0.
template <typename Pred, typename Tail>
size_t space_then_run(const Piece& p, size_t i, Pred pred, Tail tail) {
  const size_t start = p.at(i) == ' ' && pred(p.at(i + 1)) ? i + 1 : i;
  if (!pred(p.at(start))) return 0;
  return p.run(p.run(start, pred), tail);
}
bool never(uint32_t) {
  return false;
}

// The GPT-2 regex at i (always matches at least one code point).
size_t match_gpt2(const Piece& p, size_t i) {
  if (size_t end = contraction(p, i, false)) return end;
  for (auto pred : {is_letter, is_number, is_other}) {
    if (size_t end = space_then_run(p, i, pred, never)) return end;
  }
  return whitespace_run(p, i);
}

// The Llama 3 family: contractions, [^\r\n\p{L}\p{N}]?<word>+, \p{N}{1,max_digits},
// " ?<other>+[\r\n]*", then the whitespace rules.
template <typename Word, typename Other>
size_t match_llama3_like(const Piece& p, size_t i, Word word, Other other, size_t max_digits) {
  if (size_t end = contraction(p, i, true)) return end;
  const uint32_t c = p.at(i);
  // A prefix that is itself a word character (a mark) changes nothing: the word run covers it.
  if (word(c)) return p.run(i, word);
  if (is_prefix(c) && word(p.at(i + 1))) return p.run(i + 1, word);
  if (is_number(c)) return p.run(i, is_number, max_digits);
  if (size_t end = space_then_run(p, i, other, is_newline)) return end;
  if (is_whitespace(c)) return whitespace_newline_run(p, i);
  return i + 1;
}

// Tekken's [U]*[W]+ at j (U, W: its upper and lower classes): end of the match or 0. U* is
// greedy; when no W follows the U run, it gives back its last code point that is also in W.
size_t tekken_upper_star_lower_plus(const Piece& p, size_t j) {
  const size_t u = p.run(j, is_tekken_upper);
  if (is_tekken_lower(p.at(u))) return p.run(u, is_tekken_lower);
  for (size_t k = u; k > j; --k) {
    if (is_tekken_lower(p.at(k - 1))) return k;
  }
  return 0;
}

// Tekken's [U]+[W]* at j: end of the match or 0.
size_t tekken_upper_plus_lower_star(const Piece& p, size_t j) {
  const size_t u = p.run(j, is_tekken_upper);
  return u == j ? 0 : p.run(u, is_tekken_lower);
}

// [^\r\n\p{L}\p{N}]?[U]*[W]+|[^\r\n\p{L}\p{N}]?[U]+[W]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
size_t match_tekken(const Piece& p, size_t i) {
  const bool prefix = is_prefix(p.at(i));
  for (auto word : {tekken_upper_star_lower_plus, tekken_upper_plus_lower_star}) {
    if (prefix) {
      if (size_t end = word(p, i + 1)) return end;
    }
    if (size_t end = word(p, i)) return end;
  }
  const uint32_t c = p.at(i);
  if (is_number(c)) return i + 1;
  if (size_t end = space_then_run(p, i, is_other, is_newline_or_slash)) return end;
  if (is_whitespace(c)) return whitespace_newline_run(p, i);
  return i + 1;
}

// A step: a regex-like matcher; its matches and the text between them become pieces.
using Matcher = size_t (*)(const Piece& p, size_t i);  // end of the match at i, or i

size_t gpt2(const Piece& p, size_t i) {
  return match_gpt2(p, i);
}
size_t llama3(const Piece& p, size_t i) {
  return match_llama3_like(p, i, is_letter, is_other, 3);
}
size_t qwen2(const Piece& p, size_t i) {
  return match_llama3_like(p, i, is_letter, is_other, 1);
}
size_t qwen35(const Piece& p, size_t i) {
  return match_llama3_like(p, i, is_letter_or_mark, is_other_no_mark, 1);
}
size_t tekken(const Piece& p, size_t i) {
  return match_tekken(p, i);
}
size_t one_digit(const Piece& p, size_t i) {  // \p{N}
  return is_number(p.at(i)) ? i + 1 : i;
}
size_t digit_run(const Piece& p, size_t i) {  // \p{N}+
  return p.run(i, is_number);
}
size_t three_ascii_digits(const Piece& p, size_t i) {  // [0-9][0-9][0-9]
  const size_t end = p.run(i, is_ascii_digit, 3);
  return end - i == 3 ? end : i;
}
size_t falcon_punctuation(const Piece& p, size_t i) {
  return p.run(i, is_falcon_punctuation);
}
size_t newline_char(const Piece& p, size_t i) {  // [\r\n]
  return is_newline(p.at(i)) ? i + 1 : i;
}
// \s?[table]+
size_t space_then_class(const Piece& p, size_t i, const CodepointRange* table, size_t count) {
  auto pred = [&](uint32_t cp) { return unicode::in_ranges(table, count, cp); };
  const size_t start = is_whitespace(p.at(i)) && pred(p.at(i + 1)) ? i + 1 : i;
  return pred(p.at(start)) ? p.run(start, pred) : i;
}
size_t deepseek_letters(const Piece& p, size_t i) {
  return space_then_class(p, i, kDeepseekLetters, std::size(kDeepseekLetters));
}
size_t deepseek_punctuation(const Piece& p, size_t i) {
  return space_then_class(p, i, kDeepseekPunctuation, std::size(kDeepseekPunctuation));
}
size_t deepseek_cjk(const Piece& p, size_t i) {  // [一-龥ࠀ-一가-퟿]+
  return p.run(
      i, [](uint32_t cp) { return unicode::in_ranges(kDeepseekCjk, std::size(kDeepseekCjk), cp); });
}
// \s+$: only the whitespace run that reaches the end of the piece. Checked at the start of each
// run only (a match inside a run would have started at its beginning), so it stays linear.
size_t trailing_whitespace(const Piece& p, size_t i) {
  if (i > p.begin() && is_whitespace(p.at(i - 1))) return i;
  const size_t end = p.run(i, is_whitespace);
  return end == p.end() ? end : i;
}
size_t newline_runs(const Piece& p, size_t i) {  // [^\n]+|[\n]+
  const bool newline = p.at(i) == '\n';
  return p.run(i, [newline](uint32_t cp) { return (cp == '\n') == newline; });
}

std::vector<Matcher> steps_of(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::Gpt2:
      return {gpt2};
    case PreTokenizerKind::Llama3:
      return {llama3};
    case PreTokenizerKind::Qwen2:
      return {qwen2};
    case PreTokenizerKind::Qwen35:
      return {qwen35};
    case PreTokenizerKind::Tekken:
      return {tekken};
    case PreTokenizerKind::DeepseekLlm:
      return {newline_char,        deepseek_letters, deepseek_punctuation,
              trailing_whitespace, deepseek_cjk,     digit_run};
    case PreTokenizerKind::Starcoder:
      return {one_digit, gpt2};
    case PreTokenizerKind::Falcon:
      return {falcon_punctuation, gpt2, three_ascii_digits};
    case PreTokenizerKind::Gemma4:
      return {newline_runs};
  }
  return {};
}

// Splits every piece [begin, end) of `pieces` at the matches of `step`.
std::vector<std::pair<size_t, size_t>> apply(Matcher step, const std::vector<uint32_t>& cps,
                                             const std::vector<std::pair<size_t, size_t>>& pieces) {
  std::vector<std::pair<size_t, size_t>> out;
  out.reserve(pieces.size() * 2);
  for (auto [begin, end] : pieces) {
    const Piece p(cps, begin, end);
    size_t gap = begin;
    for (size_t i = begin; i < end;) {
      const size_t m = step(p, i);
      if (m == i) {
        ++i;
        continue;
      }
      if (gap < i) out.emplace_back(gap, i);
      out.emplace_back(i, m);
      i = gap = m;
    }
    if (gap < end) out.emplace_back(gap, end);
  }
  return out;
}

}  // namespace

PreTokenizerKind pre_tokenizer_from_name(const std::string& name) {
  if (name == "gpt-2" || name == "default" || name == "mpt" || name == "olmo" || name == "phi-2") {
    return PreTokenizerKind::Gpt2;
  }
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "smaug-bpe") {
    return PreTokenizerKind::Llama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizerKind::Qwen2;
  if (name == "qwen35") return PreTokenizerKind::Qwen35;
  if (name == "tekken") return PreTokenizerKind::Tekken;
  if (name == "deepseek-llm") return PreTokenizerKind::DeepseekLlm;
  if (name == "starcoder" || name == "smollm") return PreTokenizerKind::Starcoder;
  if (name == "falcon") return PreTokenizerKind::Falcon;
  if (name == "gemma4") return PreTokenizerKind::Gemma4;
  fail("unsupported BPE pre-tokenizer '", name, "' (tokenizer.ggml.pre)");
}

bool pre_tokenizer_ignores_merges(PreTokenizerKind kind) {
  return kind == PreTokenizerKind::Llama3 || kind == PreTokenizerKind::Tekken;
}

bool pre_tokenizer_adds_bos(PreTokenizerKind kind) {
  return kind == PreTokenizerKind::Llama3 || kind == PreTokenizerKind::Tekken ||
         kind == PreTokenizerKind::Gemma4;
}

bool pre_tokenizer_byte_level(PreTokenizerKind kind) {
  return kind != PreTokenizerKind::Gemma4;
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

  std::vector<std::pair<size_t, size_t>> pieces;
  if (!cps.empty()) pieces.emplace_back(0, cps.size());
  for (Matcher step : steps_of(kind)) pieces = apply(step, cps, pieces);

  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (auto [begin, end] : pieces) {
    out.push_back(text.substr(offsets[begin], offsets[end] - offsets[begin]));
  }
  return out;
}

}  // namespace k25
