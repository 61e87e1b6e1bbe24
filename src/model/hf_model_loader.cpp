// Builds a ModelConfig and weight views from a Hugging Face directory: config.json,
// model.safetensors (or sharded), tokenizer.json.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/safetensors.h"
#include "model/hf_rope_scaling.h"
#include "model/weights.h"

namespace k25 {

namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open file");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

int positive_int(const json& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key) || !cfg[key].is_number_integer() || cfg[key].get<int64_t>() <= 0 ||
      cfg[key].get<int64_t>() > (1 << 24)) {
    fail(path, ": '", key, "' must be a positive integer");
  }
  return cfg[key].get<int>();
}

float number_or(const json& cfg, const char* key, float fallback, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  if (!cfg[key].is_number()) fail(path, ": '", key, "' must be a number");
  return cfg[key].get<float>();
}

// Gemma 3: sliding-window layers, from layer_types or else every layer but each
// sliding_window_pattern-th (default 6), with their own unscaled RoPE base.
void read_gemma3_layers(const json& cfg, const std::string& path, ModelConfig& c) {
  const int window = positive_int(cfg, "sliding_window", path);
  RopeSpec local;
  local.base = number_or(cfg, "rope_local_base_freq", 10000.0f, path);
  const json& types = cfg.contains("layer_types") ? cfg["layer_types"] : json();
  if (!types.is_null() && (!types.is_array() || static_cast<int>(types.size()) != c.n_layers)) {
    fail(path, ": 'layer_types' must list the ", c.n_layers, " layers");
  }
  const int pattern = cfg.contains("sliding_window_pattern")
                          ? positive_int(cfg, "sliding_window_pattern", path)
                          : 6;
  for (int l = 0; l < c.n_layers; ++l) {
    const bool local_layer =
        types.is_null() ? l % pattern < pattern - 1 : types[l] == "sliding_attention";
    if (local_layer) c.layers[l] = {window, local};
  }
}

ModelConfig read_config(const json& cfg, const std::string& path) {
  ModelConfig c;
  const std::string type = cfg.value("model_type", "");
  if (type == "llama" || type == "mistral") {
    c.arch = Arch::Llama;
  } else if (type == "qwen2") {
    c.arch = Arch::Qwen2;
  } else if (type == "qwen3") {
    c.arch = Arch::Qwen3;
  } else if (type == "gemma3_text") {
    c.arch = Arch::Gemma3;
  } else {
    fail(path, ": unsupported model_type '", type,
         "' (supported: llama, mistral, qwen2, qwen3, gemma3_text)");
  }
  c.name = cfg.value("_name_or_path", type);
  c.dim = positive_int(cfg, "hidden_size", path);
  c.n_layers = positive_int(cfg, "num_hidden_layers", path);
  c.n_heads = positive_int(cfg, "num_attention_heads", path);
  c.n_kv_heads = cfg.contains("num_key_value_heads")
                     ? positive_int(cfg, "num_key_value_heads", path)
                     : c.n_heads;
  c.ffn_dim = positive_int(cfg, "intermediate_size", path);
  c.n_vocab = positive_int(cfg, "vocab_size", path);
  c.context_length = cfg.contains("max_position_embeddings")
                         ? positive_int(cfg, "max_position_embeddings", path)
                         : 2048;
  const bool explicit_head_dim = cfg.contains("head_dim") && !cfg["head_dim"].is_null();
  c.head_dim = explicit_head_dim ? positive_int(cfg, "head_dim", path) : c.dim / c.n_heads;
  if ((!explicit_head_dim && c.dim % c.n_heads != 0) || c.n_heads % c.n_kv_heads != 0 ||
      c.head_dim % 2 != 0 || c.head_dim > 4096) {
    fail(path, ": inconsistent head counts (hidden ", c.dim, ", heads ", c.n_heads, "/",
         c.n_kv_heads, ", head size ", c.head_dim, ")");
  }
  c.rope_dim = c.head_dim;
  c.rope_theta = number_or(cfg, "rope_theta", 10000.0f, path);
  c.rms_eps = number_or(cfg, "rms_norm_eps", 1e-5f, path);
  // As in GGUF; Llama Q/K rows are reordered at load.
  c.rope_neox = c.arch != Arch::Llama;
  c.tied_output = cfg.value("tie_word_embeddings", c.arch == Arch::Gemma3);
  const json& scaling = cfg.contains("rope_scaling") ? cfg["rope_scaling"] : json();
  c.layers.assign(c.n_layers, LayerSpec{0, hf_rope_spec(scaling, c.rope_theta, c.rope_dim,
                                                        c.context_length, path)});
  if (c.arch == Arch::Gemma3) {
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.ffn_activation = FfnActivation::kGeluF16;
    const float query_scalar =
        number_or(cfg, "query_pre_attn_scalar", static_cast<float>(c.head_dim), path);
    if (!(query_scalar > 0)) fail(path, ": 'query_pre_attn_scalar' must be positive");
    c.attention_scale = 1.0f / std::sqrt(query_scalar);
    c.final_logit_softcap = number_or(cfg, "final_logit_softcapping", 0.0f, path);
    read_gemma3_layers(cfg, path, c);
  }
  return c;
}

// Hugging Face keeps each Llama head's Q/K rows in "rotate half" order (row j*half + i holds
// pair element j of rotation i); GGUF interleaves them (row 2i + j). Rewriting the rows once at
// load lets both formats run the same RoPE and give bit-identical results.
TensorView interleave_rope_rows(const TensorView& t, int head_dim, std::vector<uint8_t>& storage) {
  const size_t row = t.bytes / t.n_rows();
  const int64_t half = head_dim / 2;
  storage.resize(t.bytes);
  const auto* src = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    const int64_t head = r / head_dim, within = r % head_dim;
    const int64_t hf_row = head * head_dim + (within % 2) * half + within / 2;
    std::copy(src + hf_row * row, src + (hf_row + 1) * row, storage.data() + r * row);
  }
  TensorView out = t;
  out.data = storage.data();
  return out;
}

}  // namespace

LoadedModel load_hf_model(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  LoadedModel m;
  ModelConfig& c = m.config;
  c = read_config(read_json(config_path), config_path);
  std::shared_ptr<SafetensorsSet> st = SafetensorsSet::open_dir(dir);
  m.keep_alive = st;
  const int q_dim = c.n_heads * c.head_dim;
  auto t = [&](const std::string& name) { return st->tensor(name); };

  ModelWeights& w = m.weights;
  w.token_embedding =
      expect_matrix(t("model.embed_tokens.weight"), "model.embed_tokens.weight", c.dim, c.n_vocab);
  const TensorView* head = t("lm_head.weight");
  if (head == nullptr && !c.tied_output) c.tied_output = true;  // some exports omit the flag
  w.output =
      c.tied_output ? w.token_embedding : expect_matrix(head, "lm_head.weight", c.dim, c.n_vocab);
  w.output_norm = load_vector(t("model.norm.weight"), "model.norm.weight", c.dim);
  if (c.arch == Arch::Gemma3) {
    for (float& v : w.output_norm) v += 1.0f;
  }

  c.qkv_bias = t("model.layers.0.self_attn.q_proj.bias") != nullptr;
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    auto matrix = [&](const std::string& n, int64_t cols, int64_t rows) {
      return expect_matrix(t(b + n), b + n, cols, rows);
    };
    // Gemma keeps its norm weights as w for a multiplier of 1 + w (GGUF files hold 1 + w).
    auto norm = [&](const std::string& n, int64_t size) {
      std::vector<float> values = load_vector(t(b + n), b + n, size);
      if (c.arch == Arch::Gemma3) {
        for (float& v : values) v += 1.0f;
      }
      return values;
    };
    L.attn_norm = norm("input_layernorm.weight", c.dim);
    if (c.arch == Arch::Gemma3) {
      L.attn_post_norm = norm("post_attention_layernorm.weight", c.dim);
      L.ffn_norm = norm("pre_feedforward_layernorm.weight", c.dim);
      L.ffn_post_norm = norm("post_feedforward_layernorm.weight", c.dim);
    } else {
      L.ffn_norm = norm("post_attention_layernorm.weight", c.dim);
    }
    if (c.arch == Arch::Qwen3 || c.arch == Arch::Gemma3) {
      L.q_norm = norm("self_attn.q_norm.weight", c.head_dim);
      L.k_norm = norm("self_attn.k_norm.weight", c.head_dim);
    }
    L.wq = matrix("self_attn.q_proj.weight", c.dim, q_dim);
    L.wk = matrix("self_attn.k_proj.weight", c.dim, c.kv_dim());
    if (c.arch == Arch::Llama) {
      L.wq = interleave_rope_rows(L.wq, c.head_dim, m.owned.emplace_back());
      L.wk = interleave_rope_rows(L.wk, c.head_dim, m.owned.emplace_back());
    }
    L.wv = matrix("self_attn.v_proj.weight", c.dim, c.kv_dim());
    L.wo = matrix("self_attn.o_proj.weight", q_dim, c.dim);
    L.w_gate = matrix("mlp.gate_proj.weight", c.dim, c.ffn_dim);
    L.w_up = matrix("mlp.up_proj.weight", c.dim, c.ffn_dim);
    L.w_down = matrix("mlp.down_proj.weight", c.ffn_dim, c.dim);
    if (c.qkv_bias) {
      L.bq = load_vector(t(b + "self_attn.q_proj.bias"), b + "self_attn.q_proj.bias", q_dim);
      L.bk = load_vector(t(b + "self_attn.k_proj.bias"), b + "self_attn.k_proj.bias", c.kv_dim());
      L.bv = load_vector(t(b + "self_attn.v_proj.bias"), b + "self_attn.v_proj.bias", c.kv_dim());
    }
  }
  m.tokenizer = Tokenizer::from_hf_json((fs::path(dir) / "tokenizer.json").string());
  if (m.tokenizer->n_vocab() > c.n_vocab) {
    fail(dir, ": tokenizer has ", m.tokenizer->n_vocab(), " tokens but vocab_size is ", c.n_vocab);
  }
  return m;
}

}  // namespace k25
