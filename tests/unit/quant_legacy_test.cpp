// Q4_1, Q5_0, Q5_1 (kernels/quant_legacy.cpp): hand-built blocks decoded and encoded, the dot
// products against a double-precision dot and against the portable kernels, and the encoders'
// round-trip error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "block_dot_check.h"
#include "core/thread_pool.h"
#include "kernels/block_types.h"
#include "kernels/quant.h"
#include "kernels/set/block_types_portable.h"

namespace k25 {
namespace {

// The scalar kernel set's family lookups and portable kernels, the yardstick of the others.
using isa_scalar::legacy_block_kernels;
using isa_scalar::legacy_block_kernels_portable;

using testing::dequantize;
using testing::quantize;
using testing::random_row;

void put_half(std::vector<uint8_t>& block, size_t offset, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(block.data() + offset, &h, 2);
}

// qs[j] holds element j in its low nibble and element j + 16 in its high nibble.
void put_nibbles(std::vector<uint8_t>& block, size_t offset, const int* q) {
  for (int j = 0; j < 16; ++j)
    block[offset + j] = static_cast<uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
}

TEST(QuantLegacyTest, Q4_1DequantizesAHandBuiltBlock) {
  std::vector<uint8_t> block(20);
  put_half(block, 0, 0.5f);
  put_half(block, 2, -1.0f);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (7 * j) % 16;
  put_nibbles(block, 4, q);
  const std::vector<float> x = dequantize(DType::Q4_1, block, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], 0.5f * q[j] - 1.0f) << j;
  EXPECT_EQ(x[1], 2.5f);   // q = 7: low nibble of byte 1
  EXPECT_EQ(x[18], 6.0f);  // q = 126 % 16 = 14: high nibble of byte 2
}

TEST(QuantLegacyTest, Q5_0DequantizesAHandBuiltBlock) {
  std::vector<uint8_t> block(22);
  put_half(block, 0, 0.25f);
  // Fifth bits: bit j of the little-endian word at byte 2 belongs to element j.
  const uint32_t qh = 0x8001f00du;
  std::memcpy(block.data() + 2, &qh, 4);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (5 * j + 3) % 16;
  put_nibbles(block, 6, q);
  const std::vector<float> x = dequantize(DType::Q5_0, block, 32);
  for (int j = 0; j < 32; ++j) {
    const int q5 = q[j] | static_cast<int>((qh >> j) & 1) << 4;
    EXPECT_EQ(x[j], 0.25f * (q5 - 16)) << j;
  }
  EXPECT_EQ(x[0], 0.25f * (3 + 16 - 16));    // bit 0 set
  EXPECT_EQ(x[1], 0.25f * (8 - 16));         // bit 1 clear
  EXPECT_EQ(x[31], 0.25f * (14 + 16 - 16));  // bit 31 set, high nibble of byte 15
}

TEST(QuantLegacyTest, Q5_1DequantizesAHandBuiltBlock) {
  std::vector<uint8_t> block(24);
  put_half(block, 0, 0.125f);
  put_half(block, 2, -2.0f);
  const uint32_t qh = 0x0f0f00ffu;
  std::memcpy(block.data() + 4, &qh, 4);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = (3 * j + 1) % 16;
  put_nibbles(block, 8, q);
  const std::vector<float> x = dequantize(DType::Q5_1, block, 32);
  for (int j = 0; j < 32; ++j) {
    const int q5 = q[j] | static_cast<int>((qh >> j) & 1) << 4;
    EXPECT_EQ(x[j], 0.125f * q5 - 2.0f) << j;
  }
  EXPECT_EQ(x[0], 0.125f * 17 - 2.0f);
  EXPECT_EQ(x[8], 0.125f * 9 - 2.0f);
}

// Values on the quantisation grid encode to known bytes.
TEST(QuantLegacyTest, EncodersWriteKnownBlocks) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * (j % 16) + 1.0f;  // Q4_1: d 0.5, m 1, q = j % 16
  std::vector<uint8_t> q = quantize(DType::Q4_1, x);
  const std::vector<uint8_t> q4_1_head{0x00, 0x38, 0x00, 0x3c};
  EXPECT_TRUE(std::equal(q4_1_head.begin(), q4_1_head.end(), q.begin()));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[4 + j], j | j << 4) << j;
  EXPECT_EQ(dequantize(DType::Q4_1, q, 32), x);

  for (int j = 0; j < 32; ++j) x[j] = 0.5f * (j - 16);  // Q5_0: -8 is the extreme, d = 0.5
  q = quantize(DType::Q5_0, x);
  const std::vector<uint8_t> q5_0_head{0x00, 0x38, 0x00, 0x00, 0xff, 0xff};
  EXPECT_TRUE(std::equal(q5_0_head.begin(), q5_0_head.end(), q.begin()));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[6 + j], j | j << 4) << j;
  EXPECT_EQ(dequantize(DType::Q5_0, q, 32), x);

  for (int j = 0; j < 32; ++j) x[j] = 0.25f * j - 2.0f;  // Q5_1: d 0.25, m -2, q = j
  q = quantize(DType::Q5_1, x);
  const std::vector<uint8_t> q5_1_head{0x00, 0x34, 0x00, 0xc0, 0x00, 0x00, 0xff, 0xff};
  EXPECT_TRUE(std::equal(q5_1_head.begin(), q5_1_head.end(), q.begin()));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[8 + j], j | j << 4) << j;
  EXPECT_EQ(dequantize(DType::Q5_1, q, 32), x);
}

TEST(QuantLegacyTest, AllZeroBlocksEncodeToZero) {
  const std::vector<float> zeros(64, 0.0f);
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    EXPECT_EQ(dequantize(t, quantize(t, zeros), 64), zeros) << dtype_name(t);
  }
}

TEST(QuantLegacyTest, ActivationFormatsAreLlamaCpps) {
  EXPECT_EQ(block_type_kernels(DType::Q4_1)->act, ActFormat::kQ8_1);
  EXPECT_EQ(block_type_kernels(DType::Q5_0)->act, ActFormat::kQ8_0);
  EXPECT_EQ(block_type_kernels(DType::Q5_1)->act, ActFormat::kQ8_1);
  EXPECT_EQ(legacy_block_kernels(DType::Q4_K), nullptr);
}

// The activations of Q5_0 (Q8_0) and Q4_1/Q5_1 (Q8_1) round as llama.cpp's x86 quantiser does:
// x * (127 / amax), halves to even (2.5 -> 2, -3.5 -> -4, 0.5 -> 0).
TEST(QuantLegacyTest, ActivationsRoundHalfToEvenLikeLlamaCpp) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  x[4] = -1.5f;
  const std::vector<uint8_t> q8_0 = testing::quantize_activations(ActFormat::kQ8_0, x);
  const std::vector<uint8_t> q8_1 = testing::quantize_activations(ActFormat::kQ8_1, x);
  const auto* b0 = reinterpret_cast<const BlockQ8_0*>(q8_0.data());
  const auto* b1 = reinterpret_cast<const BlockQ8_1*>(q8_1.data());
  const int expected[5] = {127, 2, -4, 0, -2};
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(b0->qs[j], expected[j]) << j;
    EXPECT_EQ(b1->qs[j], expected[j]) << j;
  }
  EXPECT_EQ(f16_to_f32(b0->d), 1.0f);
  EXPECT_EQ(f16_to_f32(b1->d), 1.0f);
  EXPECT_EQ(f16_to_f32(b1->s), 123.0f);  // 127 + 2 - 4 + 0 - 2
}

TEST(QuantLegacyTest, VecDotMatchesDoubleDotOfDequantisedRows) {
  std::mt19937 rng(11);
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    for (int64_t n : {32, 256, 800, 4096}) testing::expect_vec_dot_matches_double(t, n, rng);
  }
}

// Lengths with and without a tail of fewer than eight blocks.
TEST(QuantLegacyTest, SimdVecDotEqualsPortableBitwise) {
  std::mt19937 rng(12);
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const BlockTypeKernels* portable = legacy_block_kernels_portable(t);
    ASSERT_NE(portable, nullptr);
    for (int64_t n : {32, 224, 256, 288, 2048, 5632 + 32}) {
      for (int rep = 0; rep < 4; ++rep) testing::expect_simd_equals_portable(t, *portable, n, rng);
    }
  }
}

// Each value is within half a step of its reconstruction (a whole step where Q5_0 clips its
// largest positive quant to 15), plus the f16 rounding of d and m; and encoding is
// deterministic.
TEST(QuantLegacyTest, RoundTripErrorIsWithinHalfAStep) {
  std::mt19937 rng(13);
  const std::vector<float> x = random_row(4096, rng);
  const double f16 = std::ldexp(1.0, -11);
  for (DType t : {DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const std::vector<uint8_t> q = quantize(t, x);
    EXPECT_EQ(quantize(t, x), q) << dtype_name(t);
    const std::vector<float> y = dequantize(t, q, 4096);
    double sq_err = 0.0, sq = 0.0;
    for (int64_t b = 0; b < 4096 / 32; ++b) {
      float lo = x[32 * b], hi = x[32 * b], amax = 0.0f;
      for (int j = 0; j < 32; ++j) {
        lo = std::min(lo, x[32 * b + j]);
        hi = std::max(hi, x[32 * b + j]);
        amax = std::max(amax, std::fabs(x[32 * b + j]));
      }
      for (int j = 0; j < 32; ++j) {
        const int64_t i = 32 * b + j;
        double bound;
        if (t == DType::Q5_0) {
          const double d = amax / 16.0;
          bound = (std::fabs(x[i]) > 15.5 * d ? 1.0 : 0.5) * d + 32 * d * f16;
        } else {
          const double d = (hi - lo) / (t == DType::Q4_1 ? 15.0 : 31.0);
          bound = 0.5 * d + 32 * d * f16 + std::fabs(lo) * f16;
        }
        EXPECT_LE(std::fabs(y[i] - x[i]), bound) << dtype_name(t) << " element " << i;
        sq_err += (y[i] - x[i]) * (y[i] - x[i]);
        sq += x[i] * x[i];
      }
    }
    // Uniform rounding error: step / sqrt(12), steps of about 4.5 sigma / 15 or / 31.
    EXPECT_LT(std::sqrt(sq_err / sq), t == DType::Q4_1 ? 0.1 : 0.05) << dtype_name(t);
  }
}

// Through matmul (block_type_matmul): one token and batches, one and three threads, odd row
// counts.
TEST(QuantLegacyTest, MatmulGivesVecDotForEveryTokenAndRow) {
  testing::expect_matmul_is_vec_dot_for({DType::Q4_1, DType::Q5_0, DType::Q5_1}, {32, 800, 2048});
}

// The encoders write the bytes llama-quantize wrote for the same F32 weights (the shared
// random-llama-kq models, no importance matrix).
TEST(QuantLegacyTest, EncodersReproduceLlamaQuantize) {
  K25_REQUIRE_SHARED();
  testing::expect_encoder_reproduces_llama_quantize(DType::Q4_1, "q4_1");
  testing::expect_encoder_reproduces_llama_quantize(DType::Q5_0, "q5_0");
  testing::expect_encoder_reproduces_llama_quantize(DType::Q5_1, "q5_1");
}

}  // namespace
}  // namespace k25
