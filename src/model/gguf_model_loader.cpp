// Builds a ModelConfig and weight views from a GGUF file (llama.cpp's tensor names).
#include <cmath>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/gguf_moe_loader.h"
#include "model/weights.h"

namespace k25 {

namespace {

// The RoPE of the global layers: base, linear/YaRN scaling (rope.scaling.*), Llama 3's per-pair
// factors (the rope_freqs tensor). llama.cpp reads a factor without a type as linear scaling.
RopeSpec read_rope(const GgufFile& f, const std::string& p, const ModelConfig& c) {
  RopeSpec r;
  r.base = c.rope_theta;
  double factor = f.get_float_or(p + "rope.scaling.factor", 0.0);
  if (factor == 0.0) factor = f.get_float_or(p + "rope.scale_linear", 0.0);  // the old key
  const std::string type =
      f.get_string_or(p + "rope.scaling.type", factor > 0.0 ? "linear" : "none");
  if (type == "yarn" || type == "linear") {
    if (!(factor > 0.0)) fail(f.path(), ": RoPE scaling '", type, "' needs a positive factor");
    r.freq_scale = static_cast<float>(1.0 / factor);
  } else if (type != "none") {
    fail(f.path(), ": unsupported RoPE scaling type '", type, "' (supported: none, linear, yarn)");
  }
  if (type == "yarn") {
    r.yarn = true;
    r.yarn_orig_context = static_cast<int>(
        f.get_int_or(p + "rope.scaling.original_context_length", c.context_length));
    r.yarn_beta_fast = static_cast<float>(f.get_float_or(p + "rope.scaling.yarn_beta_fast", 32.0));
    r.yarn_beta_slow = static_cast<float>(f.get_float_or(p + "rope.scaling.yarn_beta_slow", 1.0));
    if (r.yarn_orig_context <= 0) fail(f.path(), ": invalid YaRN original context length");
  }
  r.attn_factor = static_cast<float>(f.get_float_or(p + "rope.scaling.attn_factor", 1.0));
  if (const TensorView* freqs = f.tensor("rope_freqs.weight")) {
    if (freqs->type != DType::F32) fail(f.path(), ": tensor 'rope_freqs.weight' must be F32");
    r.freq_factors = load_vector(freqs, "rope_freqs.weight", c.rope_dim / 2);
  }
  return r;
}

// Gemma 3: sliding-window layers (all but every pattern-th) with their own RoPE base, unscaled.
void read_gemma3_layers(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const int window = static_cast<int>(f.get_int(p + "attention.sliding_window"));
  const int64_t pattern = f.get_int_or(p + "attention.sliding_window_pattern", 6);
  if (window <= 0 || pattern <= 0) {
    fail(f.path(), ": invalid sliding window ", window, " / pattern ", pattern);
  }
  RopeSpec local;
  local.base = static_cast<float>(f.get_float_or(p + "rope.freq_base_swa", 10000.0));
  for (int l = 0; l < c.n_layers; ++l) {
    if (l % pattern < pattern - 1) c.layers[l] = {window, local};
  }
}

ModelConfig read_config(const GgufFile& f) {
  ModelConfig c;
  const std::string arch = f.get_string("general.architecture");
  if (arch == "llama") {
    c.arch = Arch::Llama;
  } else if (arch == "qwen2") {
    c.arch = Arch::Qwen2;
  } else if (arch == "qwen3") {
    c.arch = Arch::Qwen3;
  } else if (arch == "qwen3moe") {
    c.arch = Arch::Qwen3Moe;  // qwen3's attention, a mixture of experts in every layer
    read_gguf_moe_config(f, arch, c);
  } else if (arch == "gemma3") {
    c.arch = Arch::Gemma3;
  } else {
    fail(f.path(), ": unsupported architecture '", arch,
         "' (supported: llama, qwen2, qwen3, qwen3moe, gemma3)");
  }
  const std::string p = arch + ".";
  c.name = f.get_string_or("general.name", arch);
  c.dim = static_cast<int>(f.get_int(p + "embedding_length"));
  c.n_layers = static_cast<int>(f.get_int(p + "block_count"));
  c.n_heads = static_cast<int>(f.get_int(p + "attention.head_count"));
  c.n_kv_heads = static_cast<int>(f.get_int_or(p + "attention.head_count_kv", c.n_heads));
  c.ffn_dim = static_cast<int>(f.get_int(p + "feed_forward_length"));
  c.context_length = static_cast<int>(f.get_int_or(p + "context_length", 2048));
  const bool explicit_head_dim = f.has(p + "attention.key_length");
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.ffn_dim <= 0 ||
      c.context_length <= 0 || (!explicit_head_dim && c.dim % c.n_heads != 0) ||
      c.n_heads % c.n_kv_heads != 0 || c.n_layers > 4096 || c.dim > (1 << 20) ||
      c.ffn_dim > (1 << 22)) {
    fail(f.path(), ": inconsistent hyper-parameters (dim ", c.dim, ", layers ", c.n_layers,
         ", heads ", c.n_heads, "/", c.n_kv_heads, ", ffn ", c.ffn_dim, ")");
  }
  c.head_dim = static_cast<int>(f.get_int_or(p + "attention.key_length", c.dim / c.n_heads));
  const int64_t value_dim = f.get_int_or(p + "attention.value_length", c.head_dim);
  c.rope_dim = static_cast<int>(f.get_int_or(p + "rope.dimension_count", c.head_dim));
  if (c.head_dim <= 0 || c.head_dim > 4096 || c.head_dim % 2 != 0 || value_dim != c.head_dim ||
      c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    fail(f.path(), ": unsupported head size ", c.head_dim, " (values ", value_dim,
         ") / rope dimensions ", c.rope_dim);
  }
  c.rope_theta = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
  c.rms_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_neox = c.arch != Arch::Llama;
  c.attention_scale = static_cast<float>(f.get_float_or(p + "attention.scale", 0.0));
  c.final_logit_softcap = static_cast<float>(f.get_float_or(p + "final_logit_softcapping", 0.0));
  c.layers.assign(c.n_layers, LayerSpec{0, read_rope(f, p, c)});
  c.pooling = pooling_from_gguf(f.get_int_or(p + "pooling_type", 1)).value_or(Pooling::Mean);
  if (c.arch == Arch::Gemma3) {
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.ffn_activation = FfnActivation::kGeluF16;
    // llama.cpp scales Gemma 3 27B (62 layers) by its model width per head, as Google's code
    // does (query_pre_attn_scalar = dim / heads), and every other size by the head size.
    if (c.attention_scale == 0.0f && c.n_layers == 62) {
      c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
    }
    read_gemma3_layers(f, p, c);
  }
  return c;
}

}  // namespace

LoadedModel load_gguf_model(const std::string& path) {
  std::shared_ptr<GgufFile> file = GgufFile::open(path);
  LoadedModel m;
  m.keep_alive = file;
  ModelConfig& c = m.config;
  c = read_config(*file);
  const std::string arch = file->get_string("general.architecture");
  const int q_dim = c.n_heads * c.head_dim;

  const TensorView* embd = file->tensor("token_embd.weight");
  if (embd == nullptr) fail(path, ": model is missing tensor 'token_embd.weight'");
  c.n_vocab = static_cast<int>(embd->n_rows());
  ModelWeights& w = m.weights;
  w.token_embedding = expect_matrix(embd, "token_embd.weight", c.dim, c.n_vocab);
  const TensorView* out = file->tensor("output.weight");
  c.tied_output = out == nullptr;
  w.output =
      c.tied_output ? w.token_embedding : expect_matrix(out, "output.weight", c.dim, c.n_vocab);
  w.output_norm = load_vector(file->tensor("output_norm.weight"), "output_norm.weight", c.dim);

  c.qkv_bias = file->tensor("blk.0.attn_q.bias") != nullptr;
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto t = [&](const char* n) { return file->tensor(b + n); };
    LayerWeights& L = w.layers[l];
    L.attn_norm = load_vector(t("attn_norm.weight"), b + "attn_norm.weight", c.dim);
    L.ffn_norm = load_vector(t("ffn_norm.weight"), b + "ffn_norm.weight", c.dim);
    L.wq = expect_matrix(t("attn_q.weight"), b + "attn_q.weight", c.dim, q_dim);
    L.wk = expect_matrix(t("attn_k.weight"), b + "attn_k.weight", c.dim, c.kv_dim());
    L.wv = expect_matrix(t("attn_v.weight"), b + "attn_v.weight", c.dim, c.kv_dim());
    L.wo = expect_matrix(t("attn_output.weight"), b + "attn_output.weight", q_dim, c.dim);
    if (c.n_experts > 0) {
      L.moe = load_gguf_moe_layer(*file, b, arch, c);
    } else {
      L.w_gate = expect_matrix(t("ffn_gate.weight"), b + "ffn_gate.weight", c.dim, c.ffn_dim);
      L.w_up = expect_matrix(t("ffn_up.weight"), b + "ffn_up.weight", c.dim, c.ffn_dim);
      L.w_down = expect_matrix(t("ffn_down.weight"), b + "ffn_down.weight", c.ffn_dim, c.dim);
    }
    if (c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe || c.arch == Arch::Gemma3) {
      L.q_norm = load_vector(t("attn_q_norm.weight"), b + "attn_q_norm.weight", c.head_dim);
      L.k_norm = load_vector(t("attn_k_norm.weight"), b + "attn_k_norm.weight", c.head_dim);
    }
    if (c.arch == Arch::Gemma3) {
      L.attn_post_norm =
          load_vector(t("post_attention_norm.weight"), b + "post_attention_norm.weight", c.dim);
      L.ffn_post_norm = load_vector(t("post_ffw_norm.weight"), b + "post_ffw_norm.weight", c.dim);
    }
    if (c.qkv_bias) {
      L.bq = load_vector(t("attn_q.bias"), b + "attn_q.bias", q_dim);
      L.bk = load_vector(t("attn_k.bias"), b + "attn_k.bias", c.kv_dim());
      L.bv = load_vector(t("attn_v.bias"), b + "attn_v.bias", c.kv_dim());
    }
  }
  m.tokenizer = Tokenizer::from_gguf(*file);
  if (m.tokenizer->n_vocab() != c.n_vocab) {
    fail(path, ": tokenizer has ", m.tokenizer->n_vocab(), " tokens but the embedding has ",
         c.n_vocab, " rows");
  }
  // The tensors are views into the read-only mapping of the file.
  repack_matmul_weights(m, /*release_mapped_source=*/true);
  return m;
}

}  // namespace k25
