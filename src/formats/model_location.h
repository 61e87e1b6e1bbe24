// Where a model path's files are: a GGUF file, a k25-convert output directory (model.gguf beside
// config.json and k25_metadata/), or a Hugging Face directory (config.json, *.safetensors,
// tokenizer.json). The model loader and the server's front-end tokenizer read the same files.
#pragma once

#include <string>

namespace k25 {

struct ModelLocation {
  std::string gguf;    // the GGUF file, or "" for a Hugging Face directory
  std::string hf_dir;  // the Hugging Face directory, or ""
};

// Throws k25::Error for a path that does not exist.
ModelLocation locate_model(const std::string& path);

}  // namespace k25
