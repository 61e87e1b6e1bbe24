// Element-wise and row-wise float kernels used by the forward pass.
#pragma once

#include <cstdint>

namespace k25 {

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// out = x / rms(x) * weight, over n elements.
void rmsnorm(float* out, const float* x, const float* weight, int n, float eps);
// In-place softmax over n elements.
void softmax(float* x, int n);
// softmax without the division: x[i] = exp(x[i] - max x), returns the sum (n >= 1). Attention
// divides its n-times-smaller output instead of every score.
float exp_minus_max(float* x, int n);
// a[i] = silu(a[i]) * b[i]
void silu_mul(float* a, const float* b, int n);
// a[i] = gelu(a[i]) * b[i], GELU in its tanh form as llama.cpp's CPU backend computes it: a
// table lookup by the input rounded to F16, whose entries are rounded to F16 too (inputs beyond
// +-10 give 0 or the input itself).
void gelu_f16_mul(float* a, const float* b, int n);
// a[i] += b[i]
void add_inplace(float* a, const float* b, int n);
float dot_f32(const float* a, const float* b, int n);
// a[i] += s * b[i]
void axpy(float* a, float s, const float* b, int n);
#endif

}  // namespace k25
