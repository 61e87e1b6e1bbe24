#include "model/hf_rope_scaling.h"

#include <cmath>

#include "core/error.h"
#include "model/rope.h"

namespace k25 {

namespace {

float number(const nlohmann::json& scaling, const char* key, float fallback,
             const std::string& path) {
  if (!scaling.contains(key) || scaling[key].is_null()) return fallback;
  if (!scaling[key].is_number()) fail(path, ": rope_scaling.", key, " must be a number");
  return scaling[key].get<float>();
}

}  // namespace

RopeSpec hf_rope_spec(const nlohmann::json& scaling, float base, int rope_dim, int context_length,
                      const std::string& path) {
  RopeSpec r;
  r.base = base;
  if (scaling.is_null()) return r;
  if (!scaling.is_object()) fail(path, ": rope_scaling must be an object");
  const char* type_key = scaling.contains("rope_type") ? "rope_type" : "type";
  const std::string type =
      scaling.contains(type_key) && scaling[type_key].is_string() ? scaling[type_key] : "";
  if (type == "default") return r;
  if (type != "linear" && type != "llama3" && type != "yarn") {
    fail(path, ": unsupported RoPE scaling type '", type,
         "' (supported: default, linear, llama3, yarn)");
  }
  const float factor = number(scaling, "factor", 0.0f, path);
  if (!(factor > 0.0f)) fail(path, ": rope_scaling '", type, "' needs a positive factor");
  const int orig_context = static_cast<int>(number(scaling, "original_max_position_embeddings",
                                                   static_cast<float>(context_length), path));
  if (type == "llama3") {
    const float low = number(scaling, "low_freq_factor", 1.0f, path);
    const float high = number(scaling, "high_freq_factor", 4.0f, path);
    if (!(low > 0.0f) || !(high > low) || orig_context <= 0) {
      fail(path, ": invalid llama3 rope_scaling (low_freq_factor ", low, ", high_freq_factor ",
           high, ")");
    }
    r.freq_factors = llama3_rope_factors(base, rope_dim, factor, low, high, orig_context);
    return r;
  }
  r.freq_scale = 1.0f / factor;
  if (type == "yarn") {
    if (orig_context <= 0) fail(path, ": invalid YaRN original_max_position_embeddings");
    r.yarn = true;
    r.yarn_orig_context = orig_context;
    r.yarn_beta_fast = number(scaling, "beta_fast", 32.0f, path);
    r.yarn_beta_slow = number(scaling, "beta_slow", 1.0f, path);
    // Hugging Face's attention_factor is the whole cos/sin multiplier; Rope adds YaRN's own
    // 1 + 0.1 ln(factor) to attn_factor, so that part is divided out.
    if (scaling.contains("attention_factor") && !scaling["attention_factor"].is_null()) {
      r.attn_factor =
          number(scaling, "attention_factor", 1.0f, path) / (1.0f + 0.1f * std::log(factor));
    }
  }
  return r;
}

}  // namespace k25
