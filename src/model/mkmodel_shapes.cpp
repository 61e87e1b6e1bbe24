#include "model/mkmodel_shapes.h"

#include "util/error.h"

namespace k25 {
namespace {

ModelConfig llama_config(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads,
                         int ffn_dim, int context_length) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.name = std::move(name);
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = dim / n_heads;
  c.ffn_dim = ffn_dim;
  c.context_length = context_length;
  c.rope_dim = c.head_dim;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.rope_neox = false;
  c.qkv_bias = false;
  c.tied_output = false;
  return c;
}

// Qwen2: QKV biases, tied embeddings, NeoX-style (halves) rotary embedding.
ModelConfig qwen2_config(std::string name, int dim, int n_layers, int n_heads, int n_kv_heads,
                         int ffn_dim, int context_length) {
  ModelConfig c =
      llama_config(std::move(name), dim, n_layers, n_heads, n_kv_heads, ffn_dim, context_length);
  c.arch = Arch::Qwen2;
  c.rope_theta = 1000000.0f;
  c.rms_eps = 1e-6f;
  c.rope_neox = true;
  c.qkv_bias = true;
  c.tied_output = true;
  return c;
}

constexpr const char* kLlamaSpmVocab = "ggml-vocab-llama-spm.gguf";
constexpr const char* kQwen2Vocab = "ggml-vocab-qwen2.gguf";

}  // namespace

const std::vector<MkShape>& mkmodel_shapes() {
  static const std::vector<MkShape> shapes = {
      {"tinyllama-1.1b", "TinyLlama-1.1B: llama, dim 2048, 22 layers, 32/4 heads, ffn 5632",
       kLlamaSpmVocab,
       llama_config("TinyLlama-1.1B (random weights)", 2048, 22, 32, 4, 5632, 2048)},
      {"llama-125m",
       "batcher benchmark shape (~125M): llama, dim 768, 12 layers, 12/4 heads, ffn 2048",
       kLlamaSpmVocab, llama_config("llama-125m (random weights)", 768, 12, 12, 4, 2048, 4096)},
      {"qwen2.5-0.5b", "Qwen2.5-0.5B: qwen2, dim 896, 24 layers, 14/2 heads, ffn 4864, tied",
       kQwen2Vocab, qwen2_config("Qwen2.5-0.5B (random weights)", 896, 24, 14, 2, 4864, 32768)},
      {"tiny-llama-test", "test model: llama, dim 64, 2 layers, 4/2 heads, ffn 128", kLlamaSpmVocab,
       llama_config("tiny-llama-test (random weights)", 64, 2, 4, 2, 128, 2048)},
      {"tiny-qwen2-test", "test model: qwen2, dim 64, 2 layers, 4/2 heads, ffn 128, tied",
       kQwen2Vocab, qwen2_config("tiny-qwen2-test (random weights)", 64, 2, 4, 2, 128, 32768)},
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
