// BPE by merge rank. Byte-level (GPT-2 style): bytes map to printable code points first. Raw
// (Gemma 4): merges apply to UTF-8 characters and unknown characters fall back to "<0xNN>" tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_token_index.h"

namespace k25 {

// GPT-2's bytes_to_unicode: the code point that stands for each byte in token texts.
const std::array<uint32_t, 256>& byte_level_codepoints();
// Byte-level text (UTF-8 of the code points above) for raw bytes.
std::string byte_level_encode(std::string_view bytes);
// Raw bytes for byte-level text; code points outside the map are kept as their UTF-8.
std::string byte_level_decode(std::string_view text);

class BpeModel {
 public:
  struct Options {
    bool byte_level = true;
    bool ignore_merges = false;  // a word that is a token is emitted whole (Llama 3)
  };
  // merges: "left right" strings in priority order. Merges whose parts or result are not
  // tokens can never apply and are dropped.
  BpeModel(const std::vector<std::string>& merges, const TokenIndex& index, Options options);

  // Appends the ids of one pre-tokenised word (raw bytes). Byte-level: bytes whose character is
  // not a token become `unk` (skipped when unk < 0). Raw: characters that no token covers become
  // their bytes' "<0xNN>" tokens (skipped when absent); a word of newlines that is a token is
  // emitted whole, as llama.cpp does for Gemma 4.
  void encode_word(std::string_view word, TokenId unk, std::vector<TokenId>& out) const;

 private:
  struct Merge {
    int32_t rank;
    TokenId result;
  };
  static uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  TokenId whole_word(std::string_view word) const;

  const TokenIndex& index_;
  Options options_;
  std::array<TokenId, 256> byte_ids_{};  // byte-level: each byte's character; raw: "<0xNN>"
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace k25
