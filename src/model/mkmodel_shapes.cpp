#include "model/mkmodel_shapes.h"

#include "core/error.h"

namespace k25 {
namespace {

ArchParams llama(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads, int ffn_dim,
                 int context_length) {
  ArchParams p;
  p.arch = "llama";
  p.name = std::move(name) + " (random weights)";
  p.dim = dim;
  p.n_layers = n_layers;
  p.n_heads = n_heads;
  p.n_kv_heads = n_kv_heads;
  p.head_dim = dim / n_heads;
  p.ffn_dim = ffn_dim;
  p.context_length = context_length;
  return p;
}

// Llama 3.1/3.2: rope base 500000 and the llama3 rope_freqs factors.
ArchParams llama3(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads, int ffn_dim,
                  float factor) {
  ArchParams p = llama(std::move(name), dim, n_layers, n_heads, n_kv_heads, ffn_dim, 131072);
  p.rope_theta = 500000.0f;
  p.rope_scaling = "llama3";
  p.rope_factor = factor;
  p.rope_low_freq_factor = 1.0f;
  p.rope_high_freq_factor = 4.0f;
  p.rope_original_context = 8192;
  p.tied_output = true;
  return p;
}

// Qwen2: QKV biases, tied embeddings, NeoX-style (halves) rotary embedding.
ArchParams qwen2(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads, int ffn_dim,
                 int context_length) {
  ArchParams p =
      llama(std::move(name), dim, n_layers, n_heads, n_kv_heads, ffn_dim, context_length);
  p.arch = "qwen2";
  p.rope_theta = 1000000.0f;
  p.rms_eps = 1e-6f;
  p.qkv_bias = true;
  p.tied_output = true;
  return p;
}

// Qwen3: no biases, per-head q/k norms, a head size of its own.
ArchParams qwen3(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads, int head_dim,
                 int ffn_dim, bool tied) {
  ArchParams p = qwen2(std::move(name), dim, n_layers, n_heads, n_kv_heads, ffn_dim, 40960);
  p.arch = "qwen3";
  p.head_dim = head_dim;
  p.qkv_bias = false;
  p.qk_norm = true;
  p.tied_output = tied;
  return p;
}

ArchParams qwen3moe(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads,
                    int head_dim, int n_experts, int n_used, int expert_ffn_dim, int ffn_dim) {
  ArchParams p =
      qwen3(std::move(name), dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, false);
  p.arch = "qwen3moe";
  p.n_experts = n_experts;
  p.n_experts_used = n_used;
  p.expert_ffn_dim = expert_ffn_dim;
  return p;
}

// Gemma 3: q/k norms, pre/post norms, interleaved sliding-window layers with their own RoPE base.
ArchParams gemma3(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads,
                  int head_dim, int ffn_dim, int window, int pattern) {
  ArchParams p = llama(std::move(name), dim, n_layers, n_heads, n_kv_heads, ffn_dim, 32768);
  p.arch = "gemma3";
  p.head_dim = head_dim;
  p.rope_theta = 1000000.0f;
  p.rope_theta_swa = 10000.0f;
  p.rms_eps = 1e-6f;
  p.qk_norm = true;
  p.tied_output = true;
  p.sliding_window = window;
  p.sliding_window_pattern = pattern;
  return p;
}

constexpr const char* kLlamaSpmVocab = "ggml-vocab-llama-spm.gguf";
constexpr const char* kLlamaBpeVocab = "ggml-vocab-llama-bpe.gguf";
constexpr const char* kQwen2Vocab = "ggml-vocab-qwen2.gguf";
constexpr const char* kGpt2Vocab = "ggml-vocab-gpt-2.gguf";

}  // namespace

const std::vector<MkShape>& mkmodel_shapes() {
  static const std::vector<MkShape> shapes = {
      {"tinyllama-1.1b", "TinyLlama-1.1B: llama, dim 2048, 22 layers, 32/4 heads, ffn 5632",
       kLlamaSpmVocab, llama("TinyLlama-1.1B", 2048, 22, 32, 4, 5632, 2048)},
      {"llama3.2-1b",
       "Llama-3.2-1B: llama, dim 2048, 16 layers, 32/8 heads, ffn 8192, rope 500000 with llama3 "
       "factors (32, 1, 4, 8192), tied",
       kLlamaBpeVocab, llama3("Llama-3.2-1B", 2048, 16, 32, 8, 8192, 32.0f)},
      {"llama-125m",
       "batcher benchmark shape (~125M): llama, dim 768, 12 layers, 12/4 heads, ffn 2048",
       kLlamaSpmVocab, llama("llama-125m", 768, 12, 12, 4, 2048, 4096)},
      {"qwen2.5-0.5b", "Qwen2.5-0.5B: qwen2, dim 896, 24 layers, 14/2 heads, ffn 4864, tied",
       kQwen2Vocab, qwen2("Qwen2.5-0.5B", 896, 24, 14, 2, 4864, 32768)},
      {"qwen3-0.6b",
       "Qwen3-0.6B: qwen3, dim 1024, 28 layers, 16/8 heads, head dim 128, ffn 3072, tied",
       kQwen2Vocab, qwen3("Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, true)},
      {"qwen3moe-small",
       "small Qwen3-MoE (~1.3B, ~0.3B active): qwen3moe, dim 1024, 12 layers, 16/4 heads, head "
       "dim 128, 32 experts (4 used) of ffn 768",
       kQwen2Vocab, qwen3moe("qwen3moe-small", 1024, 12, 16, 4, 128, 32, 4, 768, 3072)},
      {"gemma3-1b",
       "Gemma-3-1B: gemma3, dim 1152, 26 layers, 4/1 heads, head dim 256, ffn 6912, window 512 "
       "(pattern 6)",
       kLlamaSpmVocab, gemma3("Gemma-3-1B", 1152, 26, 4, 1, 256, 6912, 512, 6)},
      {"tiny-llama-test", "test model: llama, dim 64, 2 layers, 4/2 heads, ffn 128", kLlamaSpmVocab,
       llama("tiny-llama-test", 64, 2, 4, 2, 128, 2048)},
      {"tiny-llama-kq-test",
       "test model with rows of 256 for the K-quants: llama, dim 256, 2 layers, 4/2 heads, ffn 768",
       kLlamaSpmVocab, llama("tiny-llama-kq-test", 256, 2, 4, 2, 768, 2048)},
      {"tiny-llama3-test", "test model: llama, dim 64, 2 layers, 4/2 heads, ffn 128, llama3 rope",
       kLlamaSpmVocab, llama3("tiny-llama3-test", 64, 2, 4, 2, 128, 8.0f)},
      {"tiny-qwen2-test", "test model: qwen2, dim 64, 2 layers, 4/2 heads, ffn 128, tied",
       kQwen2Vocab, qwen2("tiny-qwen2-test", 64, 2, 4, 2, 128, 32768)},
      {"tiny-qwen3-test",
       "test model: qwen3, dim 64, 2 layers, 4/2 heads, head dim 32, ffn 128, tied", kQwen2Vocab,
       qwen3("tiny-qwen3-test", 64, 2, 4, 2, 32, 128, true)},
      {"tiny-qwen3moe-test",
       "test model: qwen3moe, dim 64, 2 layers, 4/2 heads, head dim 32, 8 experts (2 used) of "
       "ffn 64",
       kGpt2Vocab, qwen3moe("tiny-qwen3moe-test", 64, 2, 4, 2, 32, 8, 2, 64, 128)},
      {"tiny-gemma3-test",
       "test model: gemma3, dim 64, 2 layers, 4/2 heads, head dim 32, ffn 128, window 32 "
       "(pattern 2)",
       kLlamaSpmVocab, gemma3("tiny-gemma3-test", 64, 2, 4, 2, 32, 128, 32, 2)},
  };
  return shapes;
}

const MkShape& find_mkmodel_shape(const std::string& name) {
  std::string known;
  for (const MkShape& shape : mkmodel_shapes()) {
    if (shape.name == name) return shape;
    known += known.empty() ? shape.name : ", " + shape.name;
  }
  fail("unknown model shape '", name, "' (known: ", known, ")");
}

}  // namespace k25
