// The hyper-parameters of a model as its files describe them: the GGUF metadata keys that
// llama.cpp's convert_hf_to_gguf.py writes for llama, qwen2, qwen3, qwen3moe and gemma3, and
// the Hugging Face config.json they come from. k25-mkmodel writes both from one ArchParams and
// k25-convert reads the config.json back into one, so the two agree by construction.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace k25 {

class GgufWriter;

struct ArchParams {
  std::string arch = "llama";  // general.architecture
  std::string name;
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn_dim = 0;
  int context_length = 2048;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;
  bool qk_norm = false;  // per-head RMSNorm of q and k (qwen3, qwen3moe, gemma3)
  bool tied_output = false;
  // Mixture of experts (qwen3moe): every layer's FFN.
  int n_experts = 0;
  int n_experts_used = 0;
  int expert_ffn_dim = 0;
  // Gemma 3: layer il uses the window when il % pattern < pattern - 1.
  int sliding_window = 0;
  int sliding_window_pattern = 0;
  float rope_theta_swa = 0.0f;
  float final_logit_softcap = 0.0f;  // 0: none
  // rope_scaling: "" none, "llama3" (written as the rope_freqs.weight tensor), "linear", "yarn".
  std::string rope_scaling;
  float rope_factor = 1.0f;
  float rope_low_freq_factor = 1.0f;   // llama3
  float rope_high_freq_factor = 4.0f;  // llama3
  int rope_original_context = 0;       // llama3, yarn

  bool is_moe() const { return n_experts > 0; }
  bool is_llama() const { return arch == "llama"; }
  bool is_gemma3() const { return arch == "gemma3"; }
};

// config.json → ArchParams; throws k25::Error naming `path` and the key for what it cannot use.
ArchParams arch_params_from_hf_config(const nlohmann::json& config, const std::string& path);
// ArchParams → config.json (bos/eos -1: null).
nlohmann::json hf_config_json(const ArchParams& params, int64_t bos, int64_t eos);
// The general.architecture, general.name and <arch>.* keys.
void set_arch_metadata(GgufWriter& writer, const ArchParams& params);
// Llama 3's rope_freqs.weight: head_dim / 2 divisors of the rotation frequencies, computed in
// float32 as convert_hf_to_gguf.py does.
std::vector<float> llama3_rope_factors(const ArchParams& params);

}  // namespace k25
