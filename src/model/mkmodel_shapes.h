// Model shapes that k25-mkmodel can generate: real architectures (TinyLlama-1.1B, Qwen2.5-0.5B)
// and tiny ones of the same families for fast tests. Weights are random; only shapes are real.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.h"

namespace k25 {

struct MkShape {
  std::string name;         // what --shape takes
  std::string description;  // one line for --list
  std::string vocab_file;   // llama.cpp vocabulary GGUF in the vocab directory
  // Every field except n_vocab, which comes from the vocabulary file.
  ModelConfig config;
};

const std::vector<MkShape>& mkmodel_shapes();
// Throws k25::Error naming the shape and listing the known ones when it is unknown.
const MkShape& find_mkmodel_shape(const std::string& name);

}  // namespace k25
