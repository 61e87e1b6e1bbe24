// Writes models of real shapes with random weights (tools/k25-mkmodel): a GGUF file that k25 and
// llama.cpp both load, and optionally the same weights as a Hugging Face directory.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "model/quant_mixture.h"

namespace k25 {

struct MkModelOptions {
  std::string shape;             // a name from mkmodel_shapes()
  OutType dtype = OutType::F16;  // the tensor types by the mixture of model/quant_mixture.h
  std::string out_path;          // the GGUF file
  // Also write config.json + safetensors + tokenizer.json here (F16 only); empty: do not.
  std::string hf_dir;
  bool hf_sharded = false;  // two safetensors shards plus model.safetensors.index.json
  uint64_t seed = 1;
  int context_length = 0;  // > 0: replaces the shape's context length (long-context benchmarks)
  std::string vocab_dir = "../shared/tokenizers/llamacpp-vocab";
  std::ostream* progress = nullptr;  // one line per tensor group; nullptr: quiet
};

// Throws k25::Error with one line naming the problem (unknown shape, unsupported dtype, missing
// vocabulary, I/O failure).
void make_model(const MkModelOptions& options);

// Parses an outtype ("f16", "q8_0", "q4_k_m", ...; any case); throws k25::Error otherwise.
OutType parse_mkmodel_dtype(const std::string& text);

}  // namespace k25
