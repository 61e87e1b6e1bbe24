// The K-quants Q2_K..Q6_K: the kernel table (see kernels/block_types.h) and what the types share:
// scale packing, the tile loop and the scale fits of the encoders. Each type's own code is in
// quant_q*_k.cpp.
#include <algorithm>
#include <cmath>

#include "kernels/block_types.h"
#include "kernels/set/block_kernels_table.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"

namespace k25::K25_KERNEL_SET {

void pack_scales_mins_k4(const uint8_t* scales, const uint8_t* mins, uint8_t* p) {
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((mins[j + 4] & 0xF) << 4));
  }
}

void unpack_scales_q3_k(const uint8_t* p, int8_t* scales) {
  // Scale j: low 4 bits in nibble j / 8 of byte j % 8, high 2 bits in bit pair j / 4 of byte
  // 8 + j % 4.
  for (int j = 0; j < 16; ++j) {
    const int low = (p[j % 8] >> (4 * (j / 8))) & 0xF;
    const int high = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

void kq_dot_tile(KqRowDot row_dot, const uint8_t* w, size_t w_row_bytes, int nr,
                 const uint8_t* acts, size_t act_row_bytes, int nt, int64_t n, float* y,
                 int64_t y_stride) {
  const BlockQ8_K* x[4];
  for (int t = 0; t < nt; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(acts + t * act_row_bytes);
  float out[4];
  for (int r = 0; r < nr; ++r) {
    row_dot(w + r * w_row_bytes, x, nt, n / kQK, out);
    for (int t = 0; t < nt; ++t) y[t * y_stride + r] = out[t];
  }
}

float kq_fit_symmetric(const float* x, int n, int nmax, uint8_t* L) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  std::fill(L, L + n, static_cast<uint8_t>(nmax));
  if (amax < 1e-30f) return 0.0f;
  // Candidate grids that map the extreme element near -nmax; the least-squares scale of each
  // (weighted by x^2, so large weights matter most), keeping the best.
  float best = -1.0f, scale = 0.0f;
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    float sum_xq = 0.0f, sum_qq = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(kq_nearest(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sum_xq += w * x[i] * static_cast<float>(q);
      sum_qq += w * static_cast<float>(q * q);
    }
    if (sum_qq > 0.0f && sum_xq * sum_xq > best * sum_qq) {
      best = sum_xq * sum_xq / sum_qq;
      scale = sum_xq / sum_qq;
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<uint8_t>(std::clamp(kq_nearest(iscale * x[i]), -nmax, nmax - 1) + nmax);
      }
    }
  }
  return scale;
}

float kq_fit_affine(const float* x, const float* w, int n, int nmax, uint8_t* L, float* min) {
  float lo = *std::min_element(x, x + n);
  const float hi = *std::max_element(x, x + n);
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::fill(L, L + n, uint8_t{0});
    *min = -lo;
    return 0.0f;
  }
  const auto quantise = [&](float iscale, uint8_t* q) {
    for (int i = 0; i < n; ++i) {
      q[i] = static_cast<uint8_t>(std::clamp(kq_nearest(iscale * (x[i] - lo)), 0, nmax));
    }
  };
  const auto error = [&](float scale, float offset, const uint8_t* q) {
    float e = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float d = scale * static_cast<float>(q[i]) + offset - x[i];
      e += w[i] * d * d;
    }
    return e;
  };
  float scale = (hi - lo) / static_cast<float>(nmax), offset = lo;
  quantise(static_cast<float>(nmax) / (hi - lo), L);
  float best = error(scale, offset, L);
  // Grids from nmax - 1 to nmax + 1 steps over the range; for each, the weighted least-squares
  // scale and offset (offset <= 0, so the stored minimum is >= 0).
  uint8_t q[32];  // n <= 32
  for (int step = 0; step <= 20; ++step) {
    quantise((static_cast<float>(nmax) - 1.0f + 0.1f * static_cast<float>(step)) / (hi - lo), q);
    float sw = 0.0f, sx = 0.0f, sl = 0.0f, sll = 0.0f, sxl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(q[i]);
      sw += w[i];
      sx += w[i] * x[i];
      sl += w[i] * l;
      sll += w[i] * l * l;
      sxl += w[i] * x[i] * l;
    }
    const float det = sw * sll - sl * sl;
    if (det <= 0.0f) continue;
    float s = (sw * sxl - sx * sl) / det;
    float m = (sll * sx - sl * sxl) / det;
    if (m > 0.0f) {
      m = 0.0f;
      s = sxl / sll;
    }
    const float e = error(s, m, q);
    if (e < best) {
      best = e;
      scale = s;
      offset = m;
      std::copy(q, q + n, L);
    }
  }
  *min = -offset;
  return scale;
}

void kq_quantize_affine_k4(const float* x, int nmax, uint8_t* L, uint16_t* d_out,
                           uint16_t* dmin_out, uint8_t* packed_scales) {
  float scales[8], mins[8], w[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    // Larger values weigh more, with a floor of the sub-block's RMS.
    const float rms = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = rms + std::fabs(xs[l]);
    scales[j] = kq_fit_affine(xs, w, 32, nmax, L + 32 * j, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, kq_nearest(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, kq_nearest(inv_min * mins[j])));
  }
  pack_scales_mins_k4(ls, lm, packed_scales);
  *d_out = float_to_half(max_scale / 63.0f);
  *dmin_out = float_to_half(max_min / 63.0f);
  // Requantise against the scales as stored.
  const float d = half_to_float(*d_out), dmin = half_to_float(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float ds = d * static_cast<float>(ls[j]);
    if (ds == 0.0f) continue;
    const float dm = dmin * static_cast<float>(lm[j]);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(std::clamp(kq_nearest((x[32 * j + l] + dm) / ds), 0, nmax));
    }
  }
}

const BlockTypeKernels* kquant_block_kernels(DType type) {
  static constexpr BlockTypeKernels kQ2_K{ActFormat::kQ8_K, &dequantize_q2_k, nullptr,
                                          &vec_dot_q2_k, &dot_tile_q2_k};
  static constexpr BlockTypeKernels kQ3_K{ActFormat::kQ8_K, &dequantize_q3_k, nullptr,
                                          &vec_dot_q3_k, &dot_tile_q3_k};
  static constexpr BlockTypeKernels kQ4_K{ActFormat::kQ8_K, &dequantize_q4_k, &quantize_q4_k,
                                          &vec_dot_q4_k, &dot_tile_q4_k};
  static constexpr BlockTypeKernels kQ5_K{ActFormat::kQ8_K, &dequantize_q5_k, &quantize_q5_k,
                                          &vec_dot_q5_k, &dot_tile_q5_k};
  static constexpr BlockTypeKernels kQ6_K{ActFormat::kQ8_K, &dequantize_q6_k, &quantize_q6_k,
                                          &vec_dot_q6_k, &dot_tile_q6_k};
  static constexpr BlockKernelsEntry kTable[] = {{DType::Q2_K, &kQ2_K},
                                                 {DType::Q3_K, &kQ3_K},
                                                 {DType::Q4_K, &kQ4_K},
                                                 {DType::Q5_K, &kQ5_K},
                                                 {DType::Q6_K, &kQ6_K}};
  return find_block_kernels(kTable, type);
}

}  // namespace k25::K25_KERNEL_SET
