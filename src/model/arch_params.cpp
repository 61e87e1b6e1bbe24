#include "model/arch_params.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/rope.h"

namespace k25 {
namespace {

using nlohmann::json;

struct HfArch {
  const char* model_type;
  const char* architecture;
  const char* gguf_arch;
};

constexpr HfArch kHfArchs[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"mistral", "MistralForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3moe"},
    {"gemma3_text", "Gemma3ForCausalLM", "gemma3"},
};

const HfArch& hf_arch_of_gguf(const std::string& arch) {
  for (const HfArch& a : kHfArchs) {
    if (arch == a.gguf_arch) return a;
  }
  fail("no Hugging Face architecture for '", arch, "'");
}

int positive_int(const json& cfg, const char* key, const std::string& path) {
  if (!cfg.contains(key) || !cfg[key].is_number_integer() || cfg[key].get<int64_t>() <= 0 ||
      cfg[key].get<int64_t>() > (1 << 24)) {
    fail(path, ": '", key, "' must be a positive integer");
  }
  return cfg[key].get<int>();
}

int int_or(const json& cfg, const char* key, int fallback, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  return positive_int(cfg, key, path);
}

float float_or(const json& cfg, const char* key, float fallback, const std::string& path) {
  if (!cfg.contains(key) || cfg[key].is_null()) return fallback;
  if (!cfg[key].is_number()) fail(path, ": '", key, "' must be a number");
  return cfg[key].get<float>();
}

// The shortest decimal that reads back as the same float, so config.json says 1e-05, not
// 9.999999747378752e-06, and still loads as exactly the value the GGUF file holds.
double shortest_decimal(float value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::stod(std::string(text, result.ptr));
}

void read_rope_scaling(const json& cfg, ArchParams& p, const std::string& path) {
  if (!cfg.contains("rope_scaling") || cfg["rope_scaling"].is_null()) return;
  const json& rs = cfg["rope_scaling"];
  if (!rs.is_object()) fail(path, ": 'rope_scaling' must be an object");
  std::string type = rs.value("rope_type", rs.value("type", std::string()));
  p.rope_factor = float_or(rs, "factor", 1.0f, path);
  if (type == "default") return;
  if (type == "llama3") {
    p.rope_low_freq_factor = float_or(rs, "low_freq_factor", 1.0f, path);
    p.rope_high_freq_factor = float_or(rs, "high_freq_factor", 4.0f, path);
    p.rope_original_context = int_or(rs, "original_max_position_embeddings", 8192, path);
  } else if (type == "yarn") {
    p.rope_original_context =
        int_or(rs, "original_max_position_embeddings", p.context_length, path);
  } else if (type != "linear") {
    fail(path, ": unsupported rope_scaling type '", type, "' (supported: llama3, linear, yarn)");
  }
  p.rope_scaling = type;
}

}  // namespace

ArchParams arch_params_from_hf_config(const json& cfg, const std::string& path) {
  if (!cfg.is_object()) fail(path, ": not a JSON object");
  ArchParams p;
  const std::string type = cfg.value("model_type", "");
  const HfArch* arch = nullptr;
  for (const HfArch& a : kHfArchs) {
    if (type == a.model_type) arch = &a;
  }
  if (arch == nullptr) {
    fail(path, ": unsupported model_type '", type,
         "' (supported: llama, mistral, qwen2, qwen3, qwen3_moe, gemma3_text)");
  }
  p.arch = arch->gguf_arch;
  p.name = cfg.value("_name_or_path", type);
  p.dim = positive_int(cfg, "hidden_size", path);
  p.n_layers = positive_int(cfg, "num_hidden_layers", path);
  p.n_heads = positive_int(cfg, "num_attention_heads", path);
  p.n_kv_heads = int_or(cfg, "num_key_value_heads", p.n_heads, path);
  p.ffn_dim = positive_int(cfg, "intermediate_size", path);
  p.n_vocab = positive_int(cfg, "vocab_size", path);
  p.context_length = int_or(cfg, "max_position_embeddings", 2048, path);
  p.head_dim = int_or(cfg, "head_dim", p.dim / p.n_heads, path);
  if (p.n_heads % p.n_kv_heads != 0 || p.head_dim % 2 != 0) {
    fail(path, ": inconsistent head counts (heads ", p.n_heads, "/", p.n_kv_heads, ", head_dim ",
         p.head_dim, ")");
  }
  p.rope_theta = float_or(cfg, "rope_theta", 10000.0f, path);
  p.rms_eps = float_or(cfg, "rms_norm_eps", 1e-5f, path);
  p.tied_output = cfg.value("tie_word_embeddings", p.arch == "gemma3");
  p.qkv_bias = p.arch == "qwen2" || cfg.value("attention_bias", false);
  p.qk_norm = p.arch == "qwen3" || p.arch == "qwen3moe" || p.arch == "gemma3";
  if (p.arch == "qwen3moe") {
    p.n_experts = positive_int(cfg, "num_experts", path);
    p.n_experts_used = positive_int(cfg, "num_experts_per_tok", path);
    p.expert_ffn_dim = positive_int(cfg, "moe_intermediate_size", path);
    if (p.n_experts_used > p.n_experts) {
      fail(path, ": num_experts_per_tok ", p.n_experts_used, " exceeds num_experts ", p.n_experts);
    }
  }
  if (p.arch == "gemma3") {
    p.sliding_window = int_or(cfg, "sliding_window", 4096, path);
    p.sliding_window_pattern = int_or(cfg, "sliding_window_pattern", 6, path);
    // Newer configs list each layer's kind instead: the pattern ends at the first global layer.
    if (cfg.contains("layer_types") && cfg["layer_types"].is_array()) {
      const json& types = cfg["layer_types"];
      for (size_t i = 0; i < types.size(); ++i) {
        if (types[i] == "full_attention") {
          p.sliding_window_pattern = static_cast<int>(i) + 1;
          break;
        }
      }
    }
    p.rope_theta_swa = float_or(cfg, "rope_local_base_freq", 10000.0f, path);
    p.final_logit_softcap = float_or(cfg, "final_logit_softcapping", 0.0f, path);
  }
  read_rope_scaling(cfg, p, path);
  return p;
}

json hf_config_json(const ArchParams& p, int64_t bos, int64_t eos) {
  const HfArch& arch = hf_arch_of_gguf(p.arch);
  json c = {
      {"architectures", {arch.architecture}},
      {"model_type", arch.model_type},
      {"hidden_size", p.dim},
      {"intermediate_size", p.ffn_dim},
      {"num_hidden_layers", p.n_layers},
      {"num_attention_heads", p.n_heads},
      {"num_key_value_heads", p.n_kv_heads},
      {"head_dim", p.head_dim},
      {"hidden_act", p.is_gemma3() ? "gelu_pytorch_tanh" : "silu"},
      {"rms_norm_eps", shortest_decimal(p.rms_eps)},
      {"rope_theta", shortest_decimal(p.rope_theta)},
      {"max_position_embeddings", p.context_length},
      {"vocab_size", p.n_vocab},
      {"tie_word_embeddings", p.tied_output},
      {"torch_dtype", "float16"},
      {"initializer_range", 0.02},
      {"use_cache", true},
  };
  c["bos_token_id"] = bos >= 0 ? json(bos) : json(nullptr);
  c["eos_token_id"] = eos >= 0 ? json(eos) : json(nullptr);
  if (p.arch == "qwen2") {
    c["use_sliding_window"] = false;
    c["sliding_window"] = p.context_length;
    c["max_window_layers"] = p.n_layers;
  } else {
    c["attention_bias"] = p.qkv_bias;
  }
  if (p.is_moe()) {
    c["num_experts"] = p.n_experts;
    c["num_experts_per_tok"] = p.n_experts_used;
    c["moe_intermediate_size"] = p.expert_ffn_dim;
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
  }
  if (p.is_gemma3()) {
    c["hidden_activation"] = "gelu_pytorch_tanh";
    c["sliding_window"] = p.sliding_window;
    c["sliding_window_pattern"] = p.sliding_window_pattern;
    c["rope_local_base_freq"] = shortest_decimal(p.rope_theta_swa);
    c["query_pre_attn_scalar"] = p.head_dim;
    c["final_logit_softcapping"] =
        p.final_logit_softcap > 0 ? json(shortest_decimal(p.final_logit_softcap)) : json(nullptr);
  }
  if (p.rope_scaling == "llama3") {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", shortest_decimal(p.rope_factor)},
                         {"low_freq_factor", shortest_decimal(p.rope_low_freq_factor)},
                         {"high_freq_factor", shortest_decimal(p.rope_high_freq_factor)},
                         {"original_max_position_embeddings", p.rope_original_context}};
  } else if (p.rope_scaling == "linear") {
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", shortest_decimal(p.rope_factor)}};
  } else if (p.rope_scaling == "yarn") {
    c["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", shortest_decimal(p.rope_factor)},
                         {"original_max_position_embeddings", p.rope_original_context}};
  }
  return c;
}

void set_arch_metadata(GgufWriter& w, const ArchParams& p) {
  const std::string a = p.arch + ".";
  auto u32 = [](int v) { return static_cast<uint32_t>(v); };
  w.set_string("general.architecture", p.arch);
  w.set_string("general.name", p.name);
  w.set_u32(a + "vocab_size", u32(p.n_vocab));
  w.set_u32(a + "context_length", u32(p.context_length));
  w.set_u32(a + "embedding_length", u32(p.dim));
  w.set_u32(a + "block_count", u32(p.n_layers));
  w.set_u32(a + "feed_forward_length", u32(p.ffn_dim));
  w.set_u32(a + "attention.head_count", u32(p.n_heads));
  w.set_u32(a + "attention.head_count_kv", u32(p.n_kv_heads));
  w.set_u32(a + "rope.dimension_count", u32(p.head_dim));
  if (p.head_dim * p.n_heads != p.dim || p.qk_norm) {
    w.set_u32(a + "attention.key_length", u32(p.head_dim));
    w.set_u32(a + "attention.value_length", u32(p.head_dim));
  }
  w.set_f32(a + "rope.freq_base", p.rope_theta);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", p.rms_eps);
  if (p.is_moe()) {
    w.set_u32(a + "expert_count", u32(p.n_experts));
    w.set_u32(a + "expert_used_count", u32(p.n_experts_used));
    w.set_u32(a + "expert_feed_forward_length", u32(p.expert_ffn_dim));
  }
  if (p.is_gemma3()) {
    w.set_u32(a + "attention.sliding_window", u32(p.sliding_window));
    w.set_u32(a + "attention.sliding_window_pattern", u32(p.sliding_window_pattern));
    w.set_f32(a + "rope.freq_base_swa", p.rope_theta_swa);
    if (p.final_logit_softcap > 0) w.set_f32(a + "final_logit_softcapping", p.final_logit_softcap);
  }
  if (p.rope_scaling == "linear" || p.rope_scaling == "yarn") {
    w.set_string(a + "rope.scaling.type", p.rope_scaling);
    w.set_f32(a + "rope.scaling.factor", p.rope_factor);
    if (p.rope_scaling == "yarn") {
      w.set_u32(a + "rope.scaling.original_context_length", u32(p.rope_original_context));
    }
  }
}

std::vector<float> llama3_rope_factors(const ArchParams& p) {
  return llama3_rope_factors(p.rope_theta, p.head_dim, p.rope_factor, p.rope_low_freq_factor,
                             p.rope_high_freq_factor, p.rope_original_context);
}

}  // namespace k25
