// k25-convert's model writer: a Hugging Face directory (config.json, safetensors, tokenizer.json)
// or a GGUF file in, one GGUF file out, in the tensor types of an outtype (model/quant_mixture.h).
// Tensors are converted one at a time, in slices of rows, so memory holds one slice, never the
// model; the input stays mmapped.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "model/quant_mixture.h"

namespace k25 {

struct GgufConvertOptions {
  std::string input;   // a Hugging Face directory or a GGUF file
  std::string output;  // the GGUF file to write
  // Unset: the input's type. A GGUF input then keeps every tensor's type (a copy); a Hugging Face
  // input becomes f32, f16 or bf16 as its safetensors are.
  std::optional<OutType> outtype;
  // Keys written after the model's own (k25.flash.* gates); any k25.flash.* key of a GGUF input
  // is dropped when these hold one.
  std::vector<std::pair<std::string, GgufValue>> extra_metadata;
  std::ostream* progress = nullptr;   // the progress bar and final line; null: silent
  bool progress_interactive = false;  // redraw a bar (stderr is a terminal)
  int threads = 2;
};

struct GgufConvertResult {
  std::string outtype;  // "q4_k_m", or "copy" for a GGUF input without an outtype
  size_t n_tensors = 0;
  uint64_t bytes = 0;  // tensor data written
};

// Throws k25::Error with one line naming the problem: an unsupported architecture, a missing or
// misshapen tensor, a tensor that is already quantised and would need requantising, I/O.
// Nothing is left at `output` on failure.
GgufConvertResult convert_to_gguf(const GgufConvertOptions& options);

}  // namespace k25
