// SentencePiece-style BPE over scores (llama.cpp's "llama" tokenizer): characters merge
// greedily into the highest-scoring vocabulary piece; leftovers fall back to byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_token_index.h"

namespace k25 {

class SpmModel {
 public:
  SpmModel(const Vocab& vocab, const TokenIndex& index);

  // Appends the ids for text whose spaces are already replaced by "▁".
  void encode(std::string_view text, std::vector<TokenId>& out) const;

  // The id of byte b's "<0xNN>" token (or of the one-byte token, or unk; -1 when none).
  TokenId byte_token(uint8_t b) const { return byte_ids_[b]; }

 private:
  const Vocab& vocab_;
  const TokenIndex& index_;
  std::array<TokenId, 256> byte_ids_{};
};

// The byte of a "<0xNN>" token text, or -1 when the text is not of that form.
int parse_byte_token(std::string_view text);

// Replaces every ' ' with "▁" (U+2581).
std::string spm_escape_spaces(std::string_view text);

}  // namespace k25
