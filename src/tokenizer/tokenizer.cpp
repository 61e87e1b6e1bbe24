#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer_bpe.h"
#include "tokenizer/tokenizer_pretokenizer.h"
#include "tokenizer/tokenizer_spm.h"
#include "tokenizer/tokenizer_token_index.h"

namespace k25 {
namespace {

// Texts of control tokens that end a turn in chat models (besides EOS/EOT).
constexpr std::array<std::string_view, 10> kEndOfTurnTexts = {
    "<|eot_id|>", "<|im_end|>",      "<|endoftext|>", "<|end|>",    "<end_of_turn>",
    "<|eom_id|>", "<|end_of_text|>", "<EOT>",         "<|return|>", "<turn|>",
};

bool default_add_bos(Vocab::Kind kind, const std::string& pre) {
  if (kind == Vocab::Kind::Spm) return true;
  return pre_tokenizer_adds_bos(pre_tokenizer_from_name(pre));
}

// tokenizer.chat_template.<name> keys (llama.cpp's convert writes one per entry of a Hugging
// Face template list).
std::map<std::string, std::string> named_chat_templates(const GgufFile& file) {
  constexpr std::string_view kPrefix = "tokenizer.chat_template.";
  std::map<std::string, std::string> out;
  const auto& metadata = file.metadata();
  for (auto it = metadata.lower_bound(kPrefix); it != metadata.end(); ++it) {
    const std::string& key = it->first;
    if (!key.starts_with(kPrefix)) break;
    if (key.size() == kPrefix.size()) continue;
    out[key.substr(kPrefix.size())] = file.get_string(key);  // a wrong type names the key
  }
  return out;
}

void check_id(int64_t id, size_t n_vocab, const char* name) {
  if (id < -1 || id >= static_cast<int64_t>(n_vocab)) {
    fail("tokenizer: ", name, " token id ", id, " is outside the vocabulary of ", n_vocab,
         " tokens");
  }
}

// A special token id from GGUF metadata. Like llama.cpp, an id outside the vocabulary (seen in
// published files, e.g. a pad id equal to n_vocab) is ignored rather than rejected.
TokenId gguf_id(const GgufFile& file, const char* key, size_t n_vocab) {
  const int64_t id = file.get_int_or(key, -1);
  return id >= 0 && id < static_cast<int64_t>(n_vocab) ? static_cast<TokenId>(id) : -1;
}

}  // namespace

struct Tokenizer::Impl {
  struct Special {
    std::string_view text;
    TokenId id;
    bool always;  // user-defined tokens split even without parse_special (as llama.cpp does)
  };

  TokenIndex index;
  std::optional<SpmModel> spm;
  std::optional<BpeModel> bpe;
  PreTokenizerKind pre = PreTokenizerKind::Gpt2;
  bool byte_level = false;  // BPE token texts use GPT-2's byte-to-unicode map
  // Special tokens by first byte, longest first.
  std::array<std::vector<Special>, 256> specials;
  std::unordered_set<TokenId> end_of_generation;

  // The longest special token at text[pos], if any.
  // `plain`: the sorted byte ranges where only always-split tokens may match (nullptr: none).
  const Special* special_at(std::string_view text, size_t pos, bool parse_special,
                            const std::vector<std::pair<size_t, size_t>>* plain) const {
    for (const Special& s : specials[static_cast<uint8_t>(text[pos])]) {
      if (!(parse_special || s.always) || text.compare(pos, s.text.size(), s.text) != 0) continue;
      if (!s.always && plain && overlaps(*plain, pos, pos + s.text.size())) continue;
      return &s;
    }
    return nullptr;
  }

  static bool overlaps(const std::vector<std::pair<size_t, size_t>>& ranges, size_t begin,
                       size_t end) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                               [](size_t b, const auto& r) { return b < r.second; });
    return it != ranges.end() && it->first < end;
  }
};

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)), impl_(std::make_unique<Impl>()) {
  const size_t n = vocab_.tokens.size();
  if (n == 0) fail("tokenizer: the vocabulary is empty");
  if (vocab_.scores.empty()) vocab_.scores.assign(n, 0.0f);
  if (vocab_.types.empty()) vocab_.types.assign(n, TokenType::Normal);
  if (vocab_.scores.size() != n || vocab_.types.size() != n) {
    fail("tokenizer: ", n, " tokens but ", vocab_.scores.size(), " scores and ",
         vocab_.types.size(), " token types");
  }
  check_id(vocab_.bos, n, "bos");
  check_id(vocab_.eos, n, "eos");
  check_id(vocab_.eot, n, "eot");
  check_id(vocab_.unk, n, "unk");
  check_id(vocab_.pad, n, "pad");
  Impl& impl = *impl_;
  impl.index = TokenIndex(vocab_.tokens);
  if (vocab_.kind == Vocab::Kind::Spm) {
    impl.spm.emplace(vocab_, impl.index);
  } else {
    impl.pre = pre_tokenizer_from_name(vocab_.pre);
    impl.byte_level = pre_tokenizer_byte_level(impl.pre);
    impl.bpe.emplace(vocab_.merges, impl.index,
                     BpeModel::Options{impl.byte_level, pre_tokenizer_ignores_merges(impl.pre)});
  }
  for (size_t i = 0; i < n; ++i) {
    const TokenType type = vocab_.types[i];
    const bool user = type == TokenType::UserDefined;
    if (vocab_.tokens[i].empty()) continue;
    if (user || type == TokenType::Control || type == TokenType::Unknown) {
      impl.specials[static_cast<uint8_t>(vocab_.tokens[i][0])].push_back(
          {vocab_.tokens[i], static_cast<TokenId>(i), user});
    }
    if (type == TokenType::Control && std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(),
                                                vocab_.tokens[i]) != kEndOfTurnTexts.end()) {
      impl.end_of_generation.insert(static_cast<TokenId>(i));
    }
  }
  for (auto& bucket : impl.specials) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const Impl::Special& a, const Impl::Special& b) {
                       return a.text.size() > b.text.size();
                     });
  }
  if (vocab_.eos >= 0) impl.end_of_generation.insert(vocab_.eos);
  if (vocab_.eot >= 0) impl.end_of_generation.insert(vocab_.eot);
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  Vocab v;
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    v.kind = Vocab::Kind::Spm;
  } else if (model == "gpt2" || model == "gemma4") {
    v.kind = Vocab::Kind::Bpe;
  } else {
    fail(file.path(), ": unsupported tokenizer.ggml.model '", model,
         "' (expected llama, gpt2 or gemma4)");
  }
  // Gemma 4 files carry no pre-tokenizer name: the model implies it (as in llama.cpp).
  v.pre = model == "gemma4" ? "gemma4" : file.get_string_or("tokenizer.ggml.pre", "default");
  v.tokens = file.get_string_array("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();
  if (file.has("tokenizer.ggml.scores")) {
    const std::vector<double> scores = file.get_float_array("tokenizer.ggml.scores");
    if (scores.size() != n)
      fail(file.path(), ": tokenizer.ggml.scores has ", scores.size(), " entries for ", n,
           " tokens");
    v.scores.assign(scores.begin(), scores.end());
  }
  if (file.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = file.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n)
      fail(file.path(), ": tokenizer.ggml.token_type has ", types.size(), " entries for ", n,
           " tokens");
    v.types.reserve(n);
    for (int64_t t : types) {
      v.types.push_back(t >= 1 && t <= 6 ? static_cast<TokenType>(t) : TokenType::Normal);
    }
  }
  if (v.kind == Vocab::Kind::Bpe && file.has("tokenizer.ggml.merges")) {
    v.merges = file.get_string_array("tokenizer.ggml.merges");
  }
  v.bos = gguf_id(file, "tokenizer.ggml.bos_token_id", n);
  v.eos = gguf_id(file, "tokenizer.ggml.eos_token_id", n);
  v.eot = gguf_id(file, "tokenizer.ggml.eot_token_id", n);
  v.unk = gguf_id(file, "tokenizer.ggml.unknown_token_id", n);
  v.pad = gguf_id(file, "tokenizer.ggml.padding_token_id", n);
  try {
    v.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", default_add_bos(v.kind, v.pre));
    // llama.cpp always adds BOS for Gemma 4, whatever the file says.
    if (model == "gemma4") v.add_bos = true;
  } catch (const Error& e) {
    fail(file.path(), ": ", e.what());
  }
  v.add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix =
      file.get_bool_or("tokenizer.ggml.add_space_prefix", v.kind == Vocab::Kind::Spm);
  v.chat_template = file.get_string_or("tokenizer.chat_template", "");
  v.named_chat_templates = named_chat_templates(file);
  try {
    return std::make_unique<Tokenizer>(std::move(v));
  } catch (const Error& e) {
    fail(file.path(), ": ", e.what());
  }
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return encode_impl(text, add_special, parse_special, nullptr);
}

std::vector<TokenId> Tokenizer::encode_with_plain_ranges(
    std::string_view text, bool add_special,
    const std::vector<std::pair<size_t, size_t>>& plain_ranges) const {
  return encode_impl(text, add_special, true, &plain_ranges);
}

std::vector<TokenId> Tokenizer::encode_impl(
    std::string_view text, bool add_special, bool parse_special,
    const std::vector<std::pair<size_t, size_t>>* plain_ranges) const {
  const Impl& impl = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  // SentencePiece prefixes a space to the text at the start and after each special token.
  bool after_special = true;
  auto encode_plain = [&](std::string_view plain) {
    if (plain.empty()) return;
    if (impl.spm) {
      std::string prefixed;
      if (vocab_.add_space_prefix && after_special) prefixed += ' ';
      prefixed.append(plain);
      impl.spm->encode(spm_escape_spaces(prefixed), out);
    } else if (impl.byte_level) {
      for (std::string_view word : pre_tokenize(impl.pre, plain)) {
        impl.bpe->encode_word(word, vocab_.unk, out);
      }
    } else {
      // SentencePiece-style BPE (Gemma 4): spaces are "▁" in the token texts.
      const std::string escaped = spm_escape_spaces(plain);
      for (std::string_view word : pre_tokenize(impl.pre, escaped)) {
        impl.bpe->encode_word(word, vocab_.unk, out);
      }
    }
    after_special = false;
  };
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Impl::Special* s = impl.special_at(text, pos, parse_special, plain_ranges);
    if (!s) {
      ++pos;
      continue;
    }
    encode_plain(text.substr(plain_start, pos - plain_start));
    out.push_back(s->id);
    after_special = true;
    pos += s->text.size();
    plain_start = pos;
  }
  encode_plain(text.substr(plain_start));
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  if (id < 0 || id >= n_vocab())
    fail("tokenizer: token id ", id, " is outside the vocabulary of ", n_vocab(), " tokens");
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.types[id]) {
    case TokenType::Control:
    case TokenType::Unknown:
      return render_special ? text : std::string();
    case TokenType::UserDefined:
      return text;
    case TokenType::Unused:
      return std::string();
    case TokenType::Byte:
      if (!impl_->byte_level) {
        const int byte = parse_byte_token(text);
        return byte >= 0 ? std::string(1, static_cast<char>(byte)) : text;
      }
      break;
    case TokenType::Normal:
      break;
  }
  if (impl_->byte_level) return byte_level_decode(text);
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  for (TokenId id : ids) out += token_to_piece(id, render_special);
  return out;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return impl_->end_of_generation.count(id) != 0;
}

}  // namespace k25
