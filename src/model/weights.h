// The weights of a transformer (Llama, Qwen2/3, Gemma 3), as views into the model file(s), whatever
// the format. Small vectors (norm weights, biases) are converted to float once at load.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "kernels/repack.h"
#include "model/model_config.h"
#include "model/moe_ffn.h"
#include "tokenizer/tokenizer.h"

namespace k25 {

// Optional weights are empty vectors where an architecture has none.
struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> bq, bk, bv;      // QKV biases (Qwen2)
  std::vector<float> q_norm, k_norm;  // per-head RMSNorm of Q and K, head_dim (Qwen3, Gemma 3)
  std::vector<float> attn_post_norm;  // RMSNorm of the attention output (Gemma 3)
  std::vector<float> ffn_post_norm;   // RMSNorm of the FFN output (Gemma 3)
  TensorView wq, wk, wv, wo;          // [rows = output dim][cols = input dim]
  TensorView w_gate, w_up, w_down;    // the dense FFN, when moe is empty
  MoeWeights moe;
};

struct ModelWeights {
  TensorView token_embedding;  // [n_vocab rows][dim]
  TensorView output;           // [n_vocab rows][dim]; token_embedding when tied
  std::vector<float> output_norm;
  std::vector<LayerWeights> layers;
};

// Everything a loader produces. `keep_alive` owns the mapped files the views point into;
// `owned` holds tensors the loader had to rewrite (views may point into it); `packed` the
// repacked copies of matmul weights that the views' `packed` pointers point into.
struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<void> keep_alive;
  std::vector<std::vector<uint8_t>> owned;
  PackedWeights packed;
};

LoadedModel load_gguf_model(const std::string& path);
LoadedModel load_hf_model(const std::string& dir);

// Checks a tensor's shape ([cols, rows] in GGUF ne order) and returns it; the error names the
// tensor and both shapes.
const TensorView& expect_matrix(const TensorView* t, const std::string& name, int64_t cols,
                                int64_t rows);
// Repacks every matmul weight (attention, FFN, output) that this build's kernels can use
// repacked (see kernels/repack.h) into m.packed. With release_mapped_source, the weights' bytes
// are in a read-only file mapping: their pages are dropped from memory (they would be read back
// from the file if anything touched them again), so the copy does not double the resident size.
// The token embedding keeps its layout (row lookups); a tied output matrix gets its own copy.
void repack_matmul_weights(LoadedModel& m, bool release_mapped_source);
// A 1-D weight (norm, bias) of n elements in any float dtype, converted to float.
std::vector<float> load_vector(const TensorView* t, const std::string& name, int64_t n);

}  // namespace k25
