// The tensors of each architecture under both naming schemes: GGUF's (llama.cpp) and Hugging
// Face's, with what turns one into the other. k25-mkmodel writes both copies from this list and
// k25-convert reads a Hugging Face directory through it, so they agree by construction; the
// GGUF names and shapes are those of ../shared/models/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch_params.h"

namespace k25 {

enum class LayoutKind {
  Matrix,     // a weight matrix (quantised by the mixture)
  Norm,       // an RMSNorm gain
  Bias,       // a bias vector
  Router,     // the MoE router: a matrix that stays F32
  RopeFreqs,  // Llama 3's rope_freqs.weight: computed from the config, not stored by HF
};

struct LayoutTensor {
  std::string gguf_name;
  // The Hugging Face name; for stacked experts (n_experts > 0) it holds "{e}" where the expert
  // index goes. Empty for RopeFreqs.
  std::string hf_name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length
  LayoutKind kind = LayoutKind::Matrix;
  // llama.cpp's converter reorders the rows of Llama's q/k projections, per head, from Hugging
  // Face's rotate-half layout to interleaved pairs. 0: no reordering, else the rows per head.
  int permute_head_rows = 0;
  // Gemma stores RMSNorm gains as w with the norm computing (1 + w); GGUF holds 1 + w.
  float gguf_offset = 0.0f;
  int n_experts = 0;  // > 0: ne[2] experts, each its own Hugging Face tensor
  int layer = -1;     // block index, -1 outside the blocks
};

// In the order llama.cpp's converter writes them (rope_freqs first, then token_embd, the blocks,
// output_norm and output).
std::vector<LayoutTensor> tensor_layout(const ArchParams& params);

// hf_name with "{e}" replaced by the expert index.
std::string expert_hf_name(const LayoutTensor& t, int expert);

// The Hugging Face row that holds GGUF row `row` of a permuted tensor (identity otherwise).
int64_t hf_row_of(const LayoutTensor& t, int64_t row);

}  // namespace k25
