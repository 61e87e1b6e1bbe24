// The tensor types of a GGUF file type ("outtype"): which type each tensor gets, by the rules that
// llama-quantize applies by default (no imatrix, no overrides), so that a k25-convert
// `--outtype q4_k_m` file has the mixture users know from downloaded Q4_K_M files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace k25 {

// A whole-file type: the types of the quantisable tensors, as llama.cpp's LLAMA_FTYPE names them.
enum class OutType { F32, F16, BF16, Q8_0, Q4_0, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K };

// "f16", "q4_k_m", ... (any case); throws k25::Error listing the accepted names.
OutType parse_outtype(const std::string& text);
const char* outtype_name(OutType type);    // "q4_k_m"
uint32_t outtype_file_type(OutType type);  // llama.cpp's general.file_type value
// The type of the bulk of the tensors (Q4_K for q4_k_m).
DType outtype_base_type(OutType type);

// What of the model the rules look at besides the tensor itself.
struct MixtureModel {
  int n_layers = 0;
  int n_experts = 0;         // 0 or 1: dense
  bool tied_output = false;  // no output.weight: token_embd is also the output matrix
};

// The type of tensor `name` with GGUF shape `ne` (ne[0] the row length). Tensors that are not
// quantised (1-D tensors, norms, the MoE router) are F32. Layers come from the "blk.N." prefix.
// Rows whose length the chosen block does not divide fall back as llama-quantize does (Q4_K to
// Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), and to F16 when that block does not divide them either.
DType tensor_type_for(std::string_view name, const std::vector<int64_t>& ne,
                      const MixtureModel& model, OutType outtype);

}  // namespace k25
