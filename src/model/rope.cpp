#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace k25 {

namespace {

// YaRN's correction dimension: the pair index whose wavelength makes n_rotations turns over the
// original context (llama.cpp's ggml_rope_yarn_corr_dim).
float yarn_correction_dim(int rope_dim, int orig_context, float n_rotations, float base) {
  return static_cast<float>(rope_dim) *
         std::log(static_cast<float>(orig_context) /
                  (n_rotations * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

}  // namespace

Rope::Rope(const RopeSpec& spec, int rope_dim)
    : spec_(spec),
      rope_dim_(rope_dim),
      theta_scale_(std::pow(spec.base, -2.0f / static_cast<float>(rope_dim))),
      mscale_(spec.attn_factor) {
  if (!spec_.yarn) return;
  // Pairs below `low` rotate fast enough to keep their unscaled angle (extrapolation), pairs above
  // `high` take the interpolated one, and a linear ramp blends the two between them.
  const float low = std::max(0.0f, std::floor(yarn_correction_dim(rope_dim, spec.yarn_orig_context,
                                                                  spec.yarn_beta_fast, spec.base)));
  const float high = std::min(static_cast<float>(rope_dim - 1),
                              std::ceil(yarn_correction_dim(rope_dim, spec.yarn_orig_context,
                                                            spec.yarn_beta_slow, spec.base)));
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
    ramp_.push_back(1.0f - std::min(1.0f, std::max(0.0f, y)));
  }
  // The magnitude correction for interpolation, 1 + 0.1 ln(factor).
  mscale_ *= 1.0f + 0.1f * std::log(1.0f / spec_.freq_scale);
}

void Rope::cos_sin(int pos, float* out) const {
  float theta = static_cast<float>(pos);
  for (int i = 0; i < rope_dim_ / 2; ++i) {
    const float extrapolated = spec_.freq_factors.empty() ? theta : theta / spec_.freq_factors[i];
    float angle = spec_.freq_scale * extrapolated;
    if (spec_.yarn) angle = angle * (1.0f - ramp_[i]) + extrapolated * ramp_[i];
    out[2 * i] = std::cos(angle) * mscale_;
    out[2 * i + 1] = std::sin(angle) * mscale_;
    theta *= theta_scale_;
  }
}

std::vector<float> llama3_rope_factors(float base, int rope_dim, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int orig_context) {
  const float context = static_cast<float>(orig_context);
  const float low_freq_wavelen = context / low_freq_factor;
  const float high_freq_wavelen = context / high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float freq =
        1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(factor);
    } else {
      const float smooth =
          (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      factors.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return factors;
}

void apply_rope(float* heads, int n_heads, int head_dim, int rope_dim, bool neox,
                const float* cos_sin) {
  const int half = rope_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* head = heads + static_cast<size_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      float* a = neox ? head + i : head + 2 * i;
      float* b = neox ? head + i + half : head + 2 * i + 1;
      const float x0 = *a, x1 = *b, c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

}  // namespace k25
