// Tokenisers: SentencePiece-style BPE ("llama") and byte-level BPE ("gpt2") with the model's
// pre-tokeniser (gpt-2, llama-bpe, qwen2, ...), loaded from GGUF metadata or tokenizer.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k25 {

class GgufFile;

using TokenId = int32_t;

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct Vocab {
  enum class Kind { Spm, Bpe };
  Kind kind = Kind::Spm;
  std::string pre = "default";  // pre-tokeniser name for BPE (tokenizer.ggml.pre)
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // BPE: "left right", in priority order
  TokenId bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend "▁" to the text
  std::string chat_template;      // tokenizer.chat_template, empty when absent
  // Named variants beside it, by name: GGUF tokenizer.chat_template.<name>, or the entries of a
  // tokenizer_config.json template list other than "default" (e.g. "tool_use", "rag").
  std::map<std::string, std::string> named_chat_templates;
};

class Tokenizer {
 public:
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  // A Hugging Face tokenizer.json (and tokenizer_config.json beside it, when present).
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& tokenizer_json_path);
  explicit Tokenizer(Vocab vocab);
  ~Tokenizer();

  // add_special: BOS/EOS as the vocabulary asks; parse_special: text like "<|im_start|>" becomes
  // the special token rather than plain text (user-defined tokens are matched either way, as in
  // llama.cpp). Text is used as given: no Unicode normalisation (NFC input is assumed).
  std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Rendered chat templates: special tokens are parsed, except in the byte ranges [begin, end)
  // of `plain_ranges` (text from the messages, sorted): a user typing "<|im_start|>" gets
  // ordinary tokens, while the template's own "<|im_start|>" is the special token.
  std::vector<TokenId> encode_with_plain_ranges(
      std::string_view text, bool add_special,
      const std::vector<std::pair<size_t, size_t>>& plain_ranges) const;
  // The raw bytes of one token (byte tokens give their byte, "▁" becomes a space, control tokens
  // give their text when render_special, else nothing).
  std::string token_to_piece(TokenId id, bool render_special = true) const;
  // The concatenated pieces. With SentencePiece's space prefix the result starts with the
  // prefixed space: decode(encode("x")) == " x".
  std::string decode(const std::vector<TokenId>& ids, bool render_special = true) const;

  const Vocab& vocab() const { return vocab_; }
  int n_vocab() const { return static_cast<int>(vocab_.tokens.size()); }
  TokenId bos() const { return vocab_.bos; }
  TokenId eos() const { return vocab_.eos; }
  bool is_end_of_generation(TokenId id) const;

 private:
  std::vector<TokenId> encode_impl(
      std::string_view text, bool add_special, bool parse_special,
      const std::vector<std::pair<size_t, size_t>>* plain_ranges) const;
  struct Impl;
  Vocab vocab_;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token pieces into text that never ends in a broken UTF-8 sequence: bytes of
// an incomplete character are held back until the character completes (or flush()).
class Utf8StreamDecoder {
 public:
  // Returns the text that became complete with these bytes.
  std::string push(std::string_view bytes);
  // Returns whatever is pending (incomplete bytes become U+FFFD).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace k25
