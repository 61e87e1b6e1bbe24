// Block formats: sizes, f16/bf16 conversions, hand-computed Q8_0/Q4_0 bytes, round-trip error
// bounds, and rejection of rows that are not whole blocks.
#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/set/quant_simd.h"

namespace k25 {
namespace {

using isa_scalar::quantize_block_q8_0;  // the scalar set's encoder (kernels/set/quant_simd.h)

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(QuantTest, BlockSizes) {
  EXPECT_EQ(dtype_block_elements(DType::F32), 1);
  EXPECT_EQ(dtype_block_elements(DType::F16), 1);
  EXPECT_EQ(dtype_block_elements(DType::BF16), 1);
  EXPECT_EQ(dtype_block_elements(DType::Q8_0), 32);
  EXPECT_EQ(dtype_block_elements(DType::Q4_0), 32);
  EXPECT_EQ(dtype_block_bytes(DType::F32), 4u);
  EXPECT_EQ(dtype_block_bytes(DType::F16), 2u);
  EXPECT_EQ(dtype_block_bytes(DType::BF16), 2u);
  EXPECT_EQ(dtype_block_bytes(DType::Q8_0), 34u);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_0), 18u);
  EXPECT_EQ(row_bytes(DType::F16, 172), 344u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 2048), 64u * 34u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_THROW(row_bytes(DType::Q8_0, 33), Error);
  EXPECT_THROW(row_bytes(DType::Q4_0, 16), Error);
  EXPECT_THROW(row_bytes(static_cast<DType>(99), 32), Error);
  EXPECT_THROW(dtype_block_bytes(static_cast<DType>(16)), Error);  // IQ2_XXS
  EXPECT_EQ(row_bytes(DType::Q4_K, 512), 2u * 144u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(row_bytes(DType::IQ4_XS, 256), 136u);
  EXPECT_EQ(row_bytes(DType::Q5_1, 64), 48u);
  EXPECT_THROW(row_bytes(DType::Q4_K, 128), Error);
  std::vector<float> buf(40);
  std::vector<uint8_t> out(200);
  EXPECT_THROW(quantize_row(DType::Q8_0, buf.data(), out.data(), 40), Error);
  EXPECT_THROW(dequantize_row(DType::Q4_0, out.data(), buf.data(), 40), Error);
}

TEST(QuantTest, F16RoundTripsEveryNonNanHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(f), bits_of(f16_to_f32_portable(static_cast<uint16_t>(h)))) << h;
    if (nan) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16_portable(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << h;
    ASSERT_EQ(f32_to_f16_portable(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(QuantTest, F16RoundingMatchesHardwareOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t b = rng();
    if (i % 2 == 0) b = (b & 0x8fffffff) | 0x30000000;  // bias towards the f16 range
    const float f = from_bits(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), f32_to_f16_portable(f)) << std::hex << b;
  }
  // Ties round to even: 1 + 2^-11 is halfway between 1 and the next half.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
}

TEST(QuantTest, Bf16ConversionsRoundToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
}

TEST(QuantTest, Q8_0KnownBlock) {
  // amax 127 gives d = 1 exactly, so the quants are roundf(x) with ties away from zero.
  std::vector<float> x(32, 0.0f);
  const float head[] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, 3.7f, -100.2f};
  std::memcpy(x.data(), head, sizeof(head));
  BlockQ8_0 block;
  quantize_row(DType::Q8_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, 0x3c00);
  const int8_t expected[] = {127, -127, 1, -1, 2, 3, -3, 0, 4, -100};
  for (int j = 0; j < 10; ++j) EXPECT_EQ(block.qs[j], expected[j]) << j;
  for (int j = 10; j < 32; ++j) EXPECT_EQ(block.qs[j], 0) << j;

  // amax 254: d = 2 (f16 0x4000), x = 3 -> 1.5 -> 2.
  x.assign(32, 0.0f);
  x[5] = -254.0f;
  x[6] = 3.0f;
  x[31] = 9.0f;
  quantize_row(DType::Q8_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, 0x4000);
  EXPECT_EQ(block.qs[5], -127);
  EXPECT_EQ(block.qs[6], 2);
  EXPECT_EQ(block.qs[31], 5);

  // An all-zero block has d = 0 and zero quants.
  x.assign(32, 0.0f);
  quantize_row(DType::Q8_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(block.qs[j], 0);
}

TEST(QuantTest, Q8_0VectorQuantiserMatchesScalarRoundf) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int trial = 0; trial < 20000; ++trial) {
    float x[32];
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 20) - 10);
    for (float& v : x) v = u(rng) * scale;
    if (trial % 3 == 0) {
      // Exact ties: amax 127 * s makes d = s, and halves of s are ties.
      for (int j = 0; j < 32; ++j) x[j] = scale * (static_cast<int>(rng() % 255) - 127) * 0.5f;
      x[0] = 127.0f * scale;
    }
    int8_t q[32];
    const float d = quantize_block_q8_0(x, q);
    float amax = 0.0f;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    ASSERT_EQ(d, amax / 127.0f);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) ASSERT_EQ(q[j], static_cast<int8_t>(std::roundf(x[j] * id))) << j;
  }
}

TEST(QuantTest, Q4_0KnownBlock) {
  // The max-magnitude element is -8, so d = 1 and q = min(15, (int8)(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;
  x[1] = 7.0f;
  x[2] = 7.6f;
  x[3] = -0.4f;
  x[4] = 0.6f;
  x[16] = 3.0f;
  x[17] = -7.9f;
  BlockQ4_0 block;
  quantize_row(DType::Q4_0, x.data(), &block, 32);
  EXPECT_EQ(block.d, 0x3c00);
  EXPECT_EQ(block.qs[0], 0x00 | (11 << 4));  // -8 -> 0, 3 -> 11
  EXPECT_EQ(block.qs[1], 15 | (0 << 4));     // 7 -> 15, -7.9 -> (int8)0.6 = 0
  EXPECT_EQ(block.qs[2], 15 | (8 << 4));     // 7.6 -> 16 clamped to 15
  EXPECT_EQ(block.qs[3], 8 | (8 << 4));      // -0.4 -> 8
  EXPECT_EQ(block.qs[4], 9 | (8 << 4));      // 0.6 -> 9
  std::vector<float> back(32);
  dequantize_row(DType::Q4_0, &block, back.data(), 32);
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[1], 7.0f);
  EXPECT_EQ(back[16], 3.0f);
  EXPECT_EQ(back[17], -8.0f);
  EXPECT_EQ(back[5], 0.0f);

  // A positive maximum gives a negative scale: 16 -> d = -2.
  x.assign(32, 1.0f);
  x[9] = 16.0f;
  quantize_row(DType::Q4_0, x.data(), &block, 32);
  EXPECT_EQ(f16_to_f32(block.d), -2.0f);
  dequantize_row(DType::Q4_0, &block, back.data(), 32);
  EXPECT_EQ(back[9], 16.0f);
}

std::vector<float> random_row(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng) * (rng() % 8 == 0 ? 10.0f : 1.0f);
  return x;
}

TEST(QuantTest, BlockRoundTripErrorBounds) {
  constexpr int64_t n = 32 * 64;
  const std::vector<float> x = random_row(n, 3);
  std::vector<float> back(n);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    std::vector<uint8_t> packed(row_bytes(type, n));
    quantize_row(type, x.data(), packed.data(), n);
    dequantize_row(type, packed.data(), back.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
      // Q8_0: half a step plus the f16 rounding of d over 127 steps. Q4_0: one step (the
      // clamp at 15 on the side opposite the maximum) plus f16 rounding.
      const float step = type == DType::Q8_0 ? amax / 127.0f : amax / 8.0f;
      const float bound =
          type == DType::Q8_0 ? step * (0.5f + 127.0f / 2048.0f) * 1.001f : step * 1.01f;
      for (int j = 0; j < 32; ++j) {
        ASSERT_LE(std::fabs(back[b * 32 + j] - x[b * 32 + j]), bound)
            << dtype_block_bytes(type) << " block " << b << " element " << j;
      }
    }
  }
}

TEST(QuantTest, FloatRowRoundTrips) {
  constexpr int64_t n = 173;
  const std::vector<float> x = random_row(n, 5);
  std::vector<float> back(n);
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<uint8_t> packed(row_bytes(type, n));
    quantize_row(type, x.data(), packed.data(), n);
    dequantize_row(type, packed.data(), back.data(), n);
    const float rel = type == DType::F32 ? 0.0f : type == DType::F16 ? 1.0f / 2048 : 1.0f / 256;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) * rel) << i;
      if (type == DType::F16) {
        ASSERT_EQ(back[i], f16_to_f32(f32_to_f16(x[i])));
      }
      if (type == DType::BF16) {
        ASSERT_EQ(back[i], bf16_to_f32(f32_to_bf16(x[i])));
      }
    }
  }
}

}  // namespace
}  // namespace k25
