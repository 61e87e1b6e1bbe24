// Model shapes that k25-mkmodel can generate: real architectures (TinyLlama-1.1B, Llama-3.2-1B,
// Qwen2.5-0.5B, Qwen3-0.6B, a small Qwen3-MoE, Gemma-3-1B) and tiny ones of the same families
// for fast tests. Weights are random; only shapes are real.
#pragma once

#include <string>
#include <vector>

#include "model/arch_params.h"

namespace k25 {

struct MkShape {
  std::string name;         // what --shape takes
  std::string description;  // one line for --list
  std::string vocab_file;   // llama.cpp vocabulary GGUF in the vocab directory
  // Every field except n_vocab, which comes from the vocabulary file.
  ArchParams params;
};

const std::vector<MkShape>& mkmodel_shapes();
// Throws k25::Error naming the shape and listing the known ones when it is unknown.
const MkShape& find_mkmodel_shape(const std::string& name);

}  // namespace k25
