#include "model/mkmodel_hf.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/hf_tokenizer_json.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace k25 {
namespace {

using json = nlohmann::json;

// The shortest decimal that reads back as the same float, so config.json says 1e-05, not
// 9.999999747378752e-06, and still loads as exactly the value the GGUF file holds.
double shortest_decimal(float value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::stod(std::string(text, result.ptr));
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) fail("cannot write ", path.string());
}

}  // namespace

void MkHfWriter::add_f16(std::string name, std::vector<int64_t> shape, std::vector<uint16_t> data) {
  tensors_.push_back({std::move(name), std::move(shape), std::move(data)});
}

void MkHfWriter::write(const ModelConfig& config, const GgufFile& vocab) const {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) fail("cannot create directory ", dir_, ": ", error.message());
  write_config(config, vocab);
  write_weights();
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(vocab);
  write_hf_tokenizer_json(tokenizer->vocab(),
                          (std::filesystem::path(dir_) / "tokenizer.json").string());
}

void MkHfWriter::write_config(const ModelConfig& c, const GgufFile& vocab) const {
  const bool qwen2 = c.arch == Arch::Qwen2;
  json config = {
      {"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", qwen2 ? "qwen2" : "llama"},
      {"hidden_size", c.dim},
      {"intermediate_size", c.ffn_dim},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"hidden_act", "silu"},
      {"rms_norm_eps", shortest_decimal(c.rms_eps)},
      {"rope_theta", shortest_decimal(c.rope_theta)},
      {"max_position_embeddings", c.context_length},
      {"vocab_size", c.n_vocab},
      {"tie_word_embeddings", c.tied_output},
      {"torch_dtype", "float16"},
      {"initializer_range", 0.02},
      {"use_cache", true},
  };
  const int64_t bos = vocab.get_int_or("tokenizer.ggml.bos_token_id", -1);
  const int64_t eos = vocab.get_int_or("tokenizer.ggml.eos_token_id", -1);
  config["bos_token_id"] = bos >= 0 ? json(bos) : json(nullptr);
  config["eos_token_id"] = eos >= 0 ? json(eos) : json(nullptr);
  if (qwen2) {
    config["use_sliding_window"] = false;
    config["sliding_window"] = c.context_length;
    config["max_window_layers"] = c.n_layers;
  } else {
    config["attention_bias"] = false;
  }
  write_text(std::filesystem::path(dir_) / "config.json", config.dump(2) + "\n");
}

void MkHfWriter::write_weights() const {
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::vector<SafetensorsTensor> all;
  size_t total_bytes = 0;
  for (const Tensor& t : tensors_) {
    const size_t bytes = t.data.size() * sizeof(uint16_t);
    all.push_back({t.name, DType::F16, t.shape, t.data.data(), bytes});
    total_bytes += bytes;
  }
  const std::filesystem::path dir(dir_);
  if (!sharded_) {
    write_safetensors((dir / "model.safetensors").string(), all, metadata);
    return;
  }
  // Two shards split at half the bytes, named and indexed as transformers does.
  size_t split = 0, first_bytes = 0;
  while (split < all.size() && first_bytes + all[split].bytes <= total_bytes / 2) {
    first_bytes += all[split++].bytes;
  }
  if (split == 0) split = 1;
  const std::string names[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  const std::vector<SafetensorsTensor> shards[2] = {
      {all.begin(), all.begin() + static_cast<std::ptrdiff_t>(split)},
      {all.begin() + static_cast<std::ptrdiff_t>(split), all.end()}};
  json weight_map = json::object();
  for (int s = 0; s < 2; ++s) {
    write_safetensors((dir / names[s]).string(), shards[s], metadata);
    for (const SafetensorsTensor& t : shards[s]) weight_map[t.name] = names[s];
  }
  const json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace k25
