// Byte-level BPE pre-tokenisers: split text into words the way the model's regex does
// (GPT-2, Llama 3 and Qwen2 patterns), implemented as hand-written matchers over code points.
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
};

// Maps a tokenizer.ggml.pre name to its pre-tokeniser; throws k25::Error for unknown names.
PreTokenizerKind pre_tokenizer_from_name(const std::string& name);

// The regex pattern string the pre-tokeniser implements (as written in tokenizer.json).
const char* pre_tokenizer_pattern(PreTokenizerKind kind);

// Splits text into consecutive pieces that together cover it exactly. Invalid UTF-8 bytes are
// kept (each counts as a symbol that is neither letter, number nor space).
std::vector<std::string_view> pre_tokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace k25
