#include "model/model.h"

#include <filesystem>

#include "model/transformer.h"
#include "util/error.h"

namespace k25 {

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return std::make_unique<Transformer>(load_hf_model(path));
  }
  if (!std::filesystem::exists(path, ec)) fail(path, ": no such file or directory");
  return std::make_unique<Transformer>(load_gguf_model(path));
}

std::unique_ptr<KvCache> Model::make_kv_cache() const {
  const ModelConfig& c = config();
  return std::make_unique<ContiguousKvCache>(c.n_layers, c.kv_dim(), c.context_length);
}

}  // namespace k25
