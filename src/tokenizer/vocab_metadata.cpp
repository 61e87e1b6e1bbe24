#include "tokenizer/vocab_metadata.h"

#include "formats/gguf.h"

namespace k25 {

void set_vocab_metadata(GgufWriter& w, const Vocab& v) {
  const bool spm = v.kind == Vocab::Kind::Spm;
  w.set_string("tokenizer.ggml.model", spm ? "llama" : "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) {
    w.set_f32_array("tokenizer.ggml.scores", std::vector<double>(v.scores.begin(), v.scores.end()));
  }
  if (!v.types.empty()) {
    std::vector<int64_t> types;
    types.reserve(v.types.size());
    for (TokenType t : v.types) types.push_back(static_cast<int64_t>(t));
    w.set_i32_array("tokenizer.ggml.token_type", std::move(types));
  }
  if (!spm) w.set_string_array("tokenizer.ggml.merges", v.merges);
  auto id = [&](const char* key, TokenId value) {
    if (value >= 0) w.set_u32(key, static_cast<uint32_t>(value));
  };
  id("tokenizer.ggml.bos_token_id", v.bos);
  id("tokenizer.ggml.eos_token_id", v.eos);
  id("tokenizer.ggml.eot_token_id", v.eot);
  id("tokenizer.ggml.unknown_token_id", v.unk);
  id("tokenizer.ggml.padding_token_id", v.pad);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  if (spm) w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
  for (const auto& [name, text] : v.named_chat_templates) {
    w.set_string("tokenizer.chat_template." + name, text);
  }
}

}  // namespace k25
