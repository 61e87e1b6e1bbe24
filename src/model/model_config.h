// Architecture hyper-parameters of a loaded model, independent of the file format. What differs
// between architectures is data here (and in the per-layer LayerSpec), read by the one forward
// pass; `arch` itself only names the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/pooling.h"

namespace k25 {

enum class Arch { Llama, Qwen2, Qwen3, Qwen3Moe, Gemma3 };

// The name general.architecture uses for it (gemma3 for Gemma 3).
const char* arch_name(Arch arch);

// The gated FFN's activation: SwiGLU (silu) or GeGLU (tanh GELU, its input and output rounded to
// F16 as llama.cpp's CPU table lookup does).
enum class FfnActivation { kSilu, kGeluF16 };

// How positions turn into rotation angles for one set of layers. Pair i of a head at position p
// rotates by p * base^(-2i / rope_dim), divided by freq_factors[i] (Llama 3's rope_freqs), times
// freq_scale (linear and YaRN scaling: 1 / factor); YaRN then blends that angle with the
// unscaled one per pair and scales cos/sin (see model/rope.h).
struct RopeSpec {
  float base = 10000.0f;
  float freq_scale = 1.0f;
  std::vector<float> freq_factors;  // rope_dim / 2 divisors, or empty
  bool yarn = false;
  int yarn_orig_context = 0;  // the context the model was trained with before the extension
  float yarn_beta_fast = 32.0f, yarn_beta_slow = 1.0f;
  float attn_factor = 1.0f;  // multiplies cos and sin (with YaRN's own 1 + 0.1 ln(factor))
};

// What one layer does differently from the others.
struct LayerSpec {
  int sliding_window = 0;  // > 0: a token attends to the last `sliding_window` positions only
  RopeSpec rope;
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string name;
  int n_vocab = 0;
  int dim = 0;  // embedding length
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // usually dim / n_heads; Qwen3 and Gemma 3 set it on its own
  int ffn_dim = 0;
  int context_length = 0;
  int rope_dim = 0;  // rotated dimensions per head (usually head_dim)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  // Rotation pairs: false = adjacent (x[2i], x[2i+1]) as GGUF Llama weights expect;
  // true = halves (x[i], x[i + rope_dim/2]) as Qwen2/3, Gemma 3 and Hugging Face Llama expect.
  bool rope_neox = false;
  bool qkv_bias = false;
  bool tied_output = false;
  float embedding_scale = 1.0f;   // token embeddings are multiplied by it (Gemma: sqrt(dim))
  float attention_scale = 0.0f;   // q.k multiplier; 0 = 1 / sqrt(head_dim)
  float final_logit_softcap = 0;  // > 0: logits = cap * tanh(logits / cap)
  FfnActivation ffn_activation = FfnActivation::kSilu;
  std::vector<LayerSpec> layers;  // one per layer, filled by the loader
  // Mixture of experts (n_experts = 0: every layer has the dense FFN of ffn_dim).
  int n_experts = 0;
  int n_experts_used = 0;  // per token
  int expert_ffn_dim = 0;
  // How /v1/embeddings pools the final hidden states: `<arch>.pooling_type` when it names mean,
  // cls or last; mean otherwise (generative models leave it out).
  Pooling pooling = Pooling::Mean;

  int kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace k25
