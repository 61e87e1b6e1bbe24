// Rotary position embedding for one RopeSpec: the cos/sin of every rotation pair at a position,
// computed with llama.cpp's float operations in its order (ggml's rope cache: the angle of pair i
// is built by i multiplications of the position by base^(-2 / rope_dim)), and their application
// to the heads of a Q or K row.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace k25 {

class Rope {
 public:
  Rope(const RopeSpec& spec, int rope_dim);
  // cos_sin[2i] and cos_sin[2i + 1]: cos and sin of pair i's angle at `pos` (rope_dim values),
  // both times the spec's attention factor.
  void cos_sin(int pos, float* out) const;
  int rope_dim() const { return rope_dim_; }

 private:
  RopeSpec spec_;
  int rope_dim_;
  float theta_scale_;        // base^(-2 / rope_dim)
  float mscale_;             // cos/sin multiplier
  std::vector<float> ramp_;  // YaRN: per pair, the weight of the unscaled angle
};

// Llama 3's per-pair frequency divisors (Hugging Face rope_type "llama3"), computed in float as
// llama.cpp's converter writes them into rope_freqs: 1 for pairs whose wavelength is below
// orig_context / high_freq_factor, `factor` above orig_context / low_freq_factor, a smooth blend
// between.
std::vector<float> llama3_rope_factors(float base, int rope_dim, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int orig_context);

// Rotates the first rope_dim elements of each of n_heads heads (head_dim floats apart) by the
// angles of `cos_sin`: adjacent pairs (x[2i], x[2i+1]), or with `neox` the halves (x[i],
// x[i + rope_dim / 2]).
void apply_rope(float* heads, int n_heads, int head_dim, int rope_dim, bool neox,
                const float* cos_sin);

}  // namespace k25
