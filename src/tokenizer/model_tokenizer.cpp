#include "tokenizer/model_tokenizer.h"

#include <filesystem>

#include "formats/gguf.h"
#include "formats/model_location.h"

namespace k25 {

std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model_path) {
  const ModelLocation location = locate_model(model_path);
  if (!location.gguf.empty()) return Tokenizer::from_gguf(*GgufFile::open(location.gguf));
  return Tokenizer::from_hf_json(
      (std::filesystem::path(location.hf_dir) / "tokenizer.json").string());
}

}  // namespace k25
