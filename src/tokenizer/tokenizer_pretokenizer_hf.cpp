// The Hugging Face pre_tokenizer Sequences that k25's pre-tokenisers correspond to.
#include "tokenizer/tokenizer_pretokenizer.h"

namespace k25 {
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

const char* gpt2_pattern() {
  return kGpt2Pattern;
}

std::vector<HfPreTokenizerStep> hf_pre_tokenizer_steps(PreTokenizerKind kind) {
  using T = HfPreTokenizerStep::Type;
  auto split = [](const char* regex) { return HfPreTokenizerStep{T::Split, regex}; };
  switch (kind) {
    case PreTokenizerKind::Gpt2:
      return {split(kGpt2Pattern)};
    case PreTokenizerKind::Llama3:
      return {split(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
    case PreTokenizerKind::Qwen2:
      return {split(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
    case PreTokenizerKind::Qwen35:
      return {split(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
    case PreTokenizerKind::Tekken:
      return {split(
          R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")};
    case PreTokenizerKind::DeepseekLlm:
      return {
          split("[\r\n]"),
          split("\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-"
                "\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-"
                "\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556"
                "\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B"
                "\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D"
                "\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
                "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4"
                "\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128"
                "\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
                "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B"
                "\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17"
                "\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
                "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
                "\U000118A0-\U000118DF\U0001E900-\U0001E943]+"),
          split("\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"),
          split("\\s+$"),
          split("[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"),
          {T::Digits, ""},
      };
    case PreTokenizerKind::Starcoder:
      return {{T::IndividualDigits, ""}, split(kGpt2Pattern)};
    case PreTokenizerKind::Falcon:
      // HF runs Digits and the [0-9]{3} Split after ByteLevel (on byte-level text); llama.cpp
      // applies [0-9]{3} to the text and leaves Digits out. Both give the same ids because the
      // vocabulary has no merge across a digit boundary.
      return {{T::Punctuation, ""}, split(kGpt2Pattern), {T::Digits, ""}, split("[0-9][0-9][0-9]")};
    case PreTokenizerKind::Gemma4:
      break;
  }
  return {};
}

}  // namespace k25
