// IQ4_NL and IQ4_XS (kernels/quant_iq4.cpp): hand-built blocks decoded, the encoders on values
// of the table, the dot products against a double-precision dot and against the portable
// kernels, and the encoders' round-trip error.
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
using isa_scalar::iq4_block_kernels;
using isa_scalar::iq4_block_kernels_portable;

using testing::dequantize;
using testing::quantize;
using testing::random_row;

// The fixed non-linear table of both types.
constexpr int kTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                            1,    13,   25,  38,  53,  69,  89,  113};

void put_half(std::vector<uint8_t>& block, size_t offset, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(block.data() + offset, &h, 2);
}

// Index of element j in the low nibble of byte j (j < 16) or the high nibble of byte j - 16.
int index_in(const std::vector<uint8_t>& block, size_t offset, int j) {
  return j < 16 ? block[offset + j] & 15 : block[offset + j - 16] >> 4;
}

TEST(QuantIq4Test, Iq4NlDequantizesAHandBuiltBlock) {
  std::vector<uint8_t> block(18);
  put_half(block, 0, 0.5f);
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | (15 - j) << 4);
  const std::vector<float> x = dequantize(DType::IQ4_NL, block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 0.5f * kTable[j]) << j;
    EXPECT_EQ(x[j + 16], 0.5f * kTable[15 - j]) << j;
  }
  EXPECT_EQ(x[0], -63.5f);
  EXPECT_EQ(x[16], 56.5f);
}

// Scales of the eight blocks: ls = 32 + l, low 4 bits in scales_l (two per byte, block ib in
// the nibble ib % 2 of byte ib / 2), high 2 bits in scales_h (bits 2 ib, 2 ib + 1).
TEST(QuantIq4Test, Iq4XsDequantizesAHandBuiltSuperBlock) {
  std::vector<uint8_t> block(136);
  put_half(block, 0, 0.25f);
  const int ls[8] = {0, 63, 32, 33, 31, 16, 48, 1};
  uint16_t scales_h = 0;
  for (int ib = 0; ib < 8; ++ib) {
    block[4 + ib / 2] |= static_cast<uint8_t>((ls[ib] & 15) << (4 * (ib % 2)));
    scales_h |= static_cast<uint16_t>((ls[ib] >> 4) << (2 * ib));
  }
  std::memcpy(block.data() + 2, &scales_h, 2);
  EXPECT_EQ(scales_h, 0b00'11'01'01'10'10'11'00);
  for (int i = 0; i < 128; ++i) block[8 + i] = static_cast<uint8_t>((i * 7 + 3) & 0xff);
  const std::vector<float> x = dequantize(DType::IQ4_XS, block, 256);
  for (int ib = 0; ib < 8; ++ib) {
    for (int j = 0; j < 32; ++j) {
      const float expected = 0.25f * (ls[ib] - 32) * kTable[index_in(block, 8 + 16 * ib, j)];
      EXPECT_EQ(x[32 * ib + j], expected) << ib << " " << j;
    }
  }
  EXPECT_EQ(x[0], 0.25f * -32 * kTable[3]);         // byte 0 of block 0 = 3
  EXPECT_EQ(x[32], 0.25f * 31 * kTable[115 & 15]);  // byte 16 = 115
  EXPECT_EQ(x[64], 0.0f);                           // ls 32
}

// A block whose values are the table times one scale encodes to those indices and that scale.
TEST(QuantIq4Test, EncodersRecoverValuesOnTheTable) {
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = 0.5f * kTable[(j * 5) % 16];
  const std::vector<uint8_t> nl = quantize(DType::IQ4_NL, x);
  for (int b = 0; b < 8; ++b) {
    const std::vector<uint8_t> block(nl.begin() + 18 * b, nl.begin() + 18 * (b + 1));
    uint16_t d;
    std::memcpy(&d, block.data(), 2);
    EXPECT_FLOAT_EQ(f16_to_f32(d), 0.5f);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(index_in(block, 2, j), (j * 5) % 16) << j;
  }
  EXPECT_EQ(dequantize(DType::IQ4_NL, nl, 256), x);

  // IQ4_XS: block ib has scale (ib + 1) / 16. The largest fixes d = -(1/2) / 32, so block ib's
  // scale is d (-4 (ib + 1)), exactly representable: the round trip is exact.
  for (int ib = 0; ib < 8; ++ib) {
    for (int j = 0; j < 32; ++j) x[32 * ib + j] *= static_cast<float>(ib + 1) / 8.0f;
  }
  const std::vector<float> y = dequantize(DType::IQ4_XS, quantize(DType::IQ4_XS, x), 256);
  EXPECT_EQ(y, x);
}

TEST(QuantIq4Test, AllZeroBlocksEncodeToZero) {
  const std::vector<float> zeros(256, 0.0f);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    EXPECT_EQ(dequantize(t, quantize(t, zeros), 256), zeros) << dtype_name(t);
  }
}

TEST(QuantIq4Test, ActivationFormatsAreLlamaCpps) {
  EXPECT_EQ(block_type_kernels(DType::IQ4_NL)->act, ActFormat::kQ8_0);
  EXPECT_EQ(block_type_kernels(DType::IQ4_XS)->act, ActFormat::kQ8_K);
  EXPECT_EQ(iq4_block_kernels(DType::Q5_0), nullptr);
}

TEST(QuantIq4Test, VecDotMatchesDoubleDotOfDequantisedRows) {
  std::mt19937 rng(21);
  for (int64_t n : {32, 256, 800, 4096}) {
    testing::expect_vec_dot_matches_double(DType::IQ4_NL, n, rng);
  }
  for (int64_t n : {256, 768, 4096}) testing::expect_vec_dot_matches_double(DType::IQ4_XS, n, rng);
}

TEST(QuantIq4Test, SimdVecDotEqualsPortableBitwise) {
  std::mt19937 rng(22);
  const BlockTypeKernels* nl = iq4_block_kernels_portable(DType::IQ4_NL);
  const BlockTypeKernels* xs = iq4_block_kernels_portable(DType::IQ4_XS);
  ASSERT_NE(nl, nullptr);
  ASSERT_NE(xs, nullptr);
  for (int rep = 0; rep < 4; ++rep) {
    for (int64_t n : {32, 224, 256, 288, 2048, 5632 + 32}) {
      testing::expect_simd_equals_portable(DType::IQ4_NL, *nl, n, rng);
    }
    for (int64_t n : {256, 2048, 2816})
      testing::expect_simd_equals_portable(DType::IQ4_XS, *xs, n, rng);
  }
}

// The relative RMS error of random rows, and encoding is deterministic.
TEST(QuantIq4Test, RoundTripErrorIsSmallAndDeterministic) {
  std::mt19937 rng(23);
  const std::vector<float> x = random_row(4096, rng);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    const std::vector<uint8_t> q = quantize(t, x);
    EXPECT_EQ(quantize(t, x), q) << dtype_name(t);
    const std::vector<float> y = dequantize(t, q, 4096);
    double sq_err = 0.0, sq = 0.0;
    for (int64_t i = 0; i < 4096; ++i) {
      sq_err += (y[i] - x[i]) * (y[i] - x[i]);
      sq += x[i] * x[i];
    }
    // Measured 0.06 (IQ4_NL), 0.07 (IQ4_XS); Q4_0 on the same rows is about 0.1.
    EXPECT_LT(std::sqrt(sq_err / sq), 0.08) << dtype_name(t);
  }
}

// Through matmul (block_type_matmul): one token and batches, one and three threads, odd row
// counts.
TEST(QuantIq4Test, MatmulGivesVecDotForEveryTokenAndRow) {
  testing::expect_matmul_is_vec_dot_for({DType::IQ4_NL, DType::IQ4_XS}, {256, 2048});
}

// The encoders write the bytes llama-quantize wrote for the same F32 weights (the shared
// random-llama-kq models, no importance matrix).
TEST(QuantIq4Test, EncodersReproduceLlamaQuantize) {
  K25_REQUIRE_SHARED();
  testing::expect_encoder_reproduces_llama_quantize(DType::IQ4_NL, "iq4_nl");
  testing::expect_encoder_reproduces_llama_quantize(DType::IQ4_XS, "iq4_xs");
}

}  // namespace
}  // namespace k25
