// Architecture hyper-parameters of a loaded model, independent of the file format.
#pragma once

#include <cstdint>
#include <string>

namespace k25 {

enum class Arch { Llama, Qwen2 };

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string name;
  int n_vocab = 0;
  int dim = 0;  // embedding length
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // dim / n_heads
  int ffn_dim = 0;
  int context_length = 0;
  int rope_dim = 0;  // rotated dimensions per head (usually head_dim)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  // Rotation pairs: false = adjacent (x[2i], x[2i+1]) as GGUF Llama weights expect;
  // true = halves (x[i], x[i + rope_dim/2]) as Qwen2 and Hugging Face Llama weights expect.
  bool rope_neox = false;
  bool qkv_bias = false;
  bool tied_output = false;
  // Mixture of experts (n_experts = 0: every layer has the dense FFN of ffn_dim).
  int n_experts = 0;
  int n_experts_used = 0;  // per token
  int expert_ffn_dim = 0;

  int kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace k25
