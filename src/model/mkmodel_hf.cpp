#include "model/mkmodel_hf.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace k25 {
namespace {

using json = nlohmann::json;

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

void MkHfWriter::write(const ArchParams& params, const GgufFile& vocab) const {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) fail("cannot create directory ", dir_, ": ", error.message());
  write_config(params, vocab);
  write_weights();
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::from_gguf(vocab);
  write_hf_tokenizer_json(tokenizer->vocab(),
                          (std::filesystem::path(dir_) / "tokenizer.json").string());
}

void MkHfWriter::write_config(const ArchParams& params, const GgufFile& vocab) const {
  const json config = hf_config_json(params, vocab.get_int_or("tokenizer.ggml.bos_token_id", -1),
                                     vocab.get_int_or("tokenizer.ggml.eos_token_id", -1));
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
