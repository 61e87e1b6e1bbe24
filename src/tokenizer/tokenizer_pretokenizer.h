// BPE pre-tokenisers: split text into words the way the model's regexes do (llama.cpp's
// tokenizer.ggml.pre names; Hugging Face pre_tokenizer Sequences), implemented as hand-written
// matchers over code points. A pre-tokeniser is a list of steps; each step splits every piece of
// the previous one further (matches and the text between them become pieces, as HF's
// Split(behavior = Isolated) does).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k25 {

enum class PreTokenizerKind {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // As Llama3 but \p{N} (one digit per word).
  Qwen2,
  // As Qwen2 with combining marks inside words: [\p{L}\p{M}]+ and [^\s\p{L}\p{M}\p{N}]+.
  Qwen35,
  // Mistral's Tekken: words split at lower-to-upper case changes, one digit per word, no
  // contractions, "/" joins a following punctuation run.
  Tekken,
  // [\r\n], \s?<cased letters>+, \s?<ASCII/CJK punctuation>+, \s+$, <CJK/Hangul>+, \p{N}+.
  DeepseekLlm,
  // \p{N} (each digit alone), then GPT-2. Also SmolLM's.
  Starcoder,
  // [\p{P}$+<=>^~|`]+, then GPT-2, then [0-9][0-9][0-9].
  Falcon,
  // Runs of '\n' and runs of anything else ([^\n]+|[\n]+). Gemma 4 is BPE over raw UTF-8 (no
  // byte-level map) with spaces written as "▁".
  Gemma4,
};

// Maps a tokenizer.ggml.pre name to its pre-tokeniser; throws k25::Error for unknown names.
PreTokenizerKind pre_tokenizer_from_name(const std::string& name);

// How llama.cpp treats a vocabulary with this pre-tokeniser.
bool pre_tokenizer_ignores_merges(PreTokenizerKind kind);  // a word in the vocab is one token
bool pre_tokenizer_adds_bos(PreTokenizerKind kind);        // default for add_bos_token
bool pre_tokenizer_byte_level(PreTokenizerKind kind);      // GPT-2 byte-to-unicode token texts

// One component of a Hugging Face pre_tokenizer Sequence, reduced to what decides the split.
// ByteLevel with use_regex is the GPT-2 Split; ByteLevel without it splits nothing.
struct HfPreTokenizerStep {
  enum class Type {
    Split,             // Split(Regex = regex, behavior = Isolated)
    Digits,            // Digits(individual_digits = false)
    IndividualDigits,  // Digits(individual_digits = true)
    Punctuation,       // Punctuation(behavior = Contiguous)
  };
  Type type;
  std::string regex;  // Split only
  bool operator==(const HfPreTokenizerStep&) const = default;
};

// The HF steps of each byte-level pre-tokeniser (all kinds but Gemma4, which has none).
std::vector<HfPreTokenizerStep> hf_pre_tokenizer_steps(PreTokenizerKind kind);

// The regex of HF's ByteLevel(use_regex = true), which is the GPT-2 pattern.
const char* gpt2_pattern();

// Splits text into consecutive pieces that together cover it exactly. Invalid UTF-8 bytes are
// kept (each counts as a symbol that is neither letter, number nor space).
std::vector<std::string_view> pre_tokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace k25
