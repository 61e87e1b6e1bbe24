// Quantised weight types whose matmul is a row-by-row integer dot product against activations
// quantised once per call, as llama.cpp does it (its "vec_dot_type"): Q4_1, Q5_0, Q5_1, IQ4_NL
// (blocks of 32) and the K-quants Q2_K..Q6_K and IQ4_XS (super-blocks of 256). Q8_0 and Q4_0 have
// their own tiled and repacked kernels in matmul.cpp and are not listed here.
//
// Each family lives in its own file and answers for its types: quant_legacy.cpp (Q4_1, Q5_0,
// Q5_1), quant_iq4.cpp (IQ4_NL, IQ4_XS) and quant_kquants.cpp (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor.h"

namespace k25 {

// The activation encodings the dot products take.
enum class ActFormat {
  kQ8_0,  // BlockQ8_0 (quant.h): f16 scale + 32 x int8
  kQ8_1,  // BlockQ8_1: Q8_0 plus d * sum(qs), for the types with a per-block minimum
  kQ8_K,  // BlockQ8_K: super-blocks of 256 with a float scale and sums of each 16 quants
};

struct BlockQ8_1 {
  uint16_t d;  // f16
  uint16_t s;  // f16: d * sum(qs)
  int8_t qs[32];
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // bsums[j] = sum of qs[16 j .. 16 j + 15]
};
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ8_K) == 292);

// Bytes of one activation row of n elements (n a multiple of the format's block).
size_t act_row_bytes(ActFormat format, int64_t n);
// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// Quantises n floats to `format` (llama.cpp's rounding: nearest integer of x / d).
void quantize_acts(ActFormat format, const float* x, void* out, int64_t n);
#endif

struct BlockTypeKernels {
  ActFormat act;
  void (*dequantize)(const void* src, float* dst, int64_t n);
  // Encodes n floats (k25-convert, k25-mkmodel); null where k25 only reads the type.
  void (*quantize)(const float* src, void* dst, int64_t n);
  // The dot product of one weight row of n elements with one activation row in `act`. It must
  // not depend on anything but its two rows, so a token's result is the same in any batch.
  float (*vec_dot)(const void* w_row, const void* act_row, int64_t n);
  // Optional (null: vec_dot for each pair): the dots of nr <= 4 consecutive weight rows with
  // nt <= 4 consecutive activation rows at once, y[t * y_stride + r], each result bitwise equal
  // to vec_dot's, so prefill reuses what it loads.
  void (*dot_tile)(const uint8_t* w, size_t w_row_bytes, int nr, const uint8_t* acts,
                   size_t act_row_bytes, int nt, int64_t n, float* y, int64_t y_stride);
};

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// The active kernel set's entries; null for types not listed above.
const BlockTypeKernels* block_type_kernels(DType type);
#endif

}  // namespace k25
