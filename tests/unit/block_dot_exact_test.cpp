// The scalar kernel set's Q8_0 / Q4_0 integer path (kernels/set/block_dot_exact.h): each block's
// dot is the exact integer sum on whichever path the build has (SSSE3, NEON, portable), the f16
// scales widen as f16_to_f32_portable does, and the set's matmul gives, bit for bit, the sum of
// dot x (d_w x d_x) block after block for every tile shape, prefill and decode alike.
#include "kernels/set/block_dot_exact.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/quant.h"
#include "kernels/set/set_entries.h"

namespace k25 {
namespace {

using isa_scalar::block_dot_exact;
using isa_scalar::QBlock;
using isa_scalar::QKind;
using isa_scalar::weight_quants;

// Element j of a Q4_0 block: its nibble minus 8.
int q4_value(const BlockQ4_0& w, int j) {
  return (j < 16 ? w.qs[j] & 0x0f : w.qs[j - 16] >> 4) - 8;
}

template <QKind K>
int32_t reference_dot(const QBlock<K>& w, const int8_t* x) {
  int32_t dot = 0;
  for (int j = 0; j < 32; ++j) {
    if constexpr (K == QKind::kQ8) {
      dot += w.qs[j] * x[j];
    } else {
      dot += q4_value(w, j) * x[j];
    }
  }
  return dot;
}

TEST(BlockDotExact, Q8AndQ4BlocksGiveTheIntegerSum) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(0, 255), act(-127, 127);
  alignas(16) int8_t x[32];
  for (int trial = 0; trial < 2000; ++trial) {
    BlockQ8_0 w8{};
    BlockQ4_0 w4{};
    // Every fourth trial at the extremes: weights of -128 and 127, nibbles 0 and 15,
    // activations of +-127, where the 16-bit pair sums are largest.
    const bool extreme = trial % 4 == 0;
    for (int j = 0; j < 32; ++j) {
      w8.qs[j] = static_cast<int8_t>(extreme ? (j % 3 == 0 ? -128 : 127) : byte(rng) - 128);
      x[j] = static_cast<int8_t>(extreme ? (j % 2 == 0 ? 127 : -127) : act(rng));
    }
    for (int j = 0; j < 16; ++j)
      w4.qs[j] = static_cast<uint8_t>(extreme ? (j % 2 ? 0xf0 : 0x0f) : byte(rng));
    int32_t x_sum = 0;
    for (int8_t v : x) x_sum += v;
    ASSERT_EQ(block_dot_exact<QKind::kQ8>(weight_quants<QKind::kQ8>(w8), x, x_sum),
              reference_dot<QKind::kQ8>(w8, x))
        << trial;
    ASSERT_EQ(block_dot_exact<QKind::kQ4>(weight_quants<QKind::kQ4>(w4), x, x_sum),
              reference_dot<QKind::kQ4>(w4, x))
        << trial;
  }
}

#if defined(__SSSE3__)
TEST(BlockDotExact, LaneTotalsSumEachVector) {
  const __m128i v[4] = {_mm_setr_epi32(1, 2, 3, 4), _mm_setr_epi32(-5, 6, 7, 8),
                        _mm_setr_epi32(1 << 30, 1 << 30, -(1 << 30), 9),
                        _mm_setr_epi32(0, 0, 0, -1)};
  alignas(16) int32_t totals[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(totals), isa_scalar::lane_totals(v));
  EXPECT_EQ(totals[0], 10);
  EXPECT_EQ(totals[1], 16);
  EXPECT_EQ(totals[2], (1 << 30) + 9);
  EXPECT_EQ(totals[3], -1);
}

TEST(BlockDotExact, HalvesWidenAsThePortableConversion) {
  // Every f16 (zeros, subnormals, normals, infinities, NaNs of every payload), four per call.
  for (uint32_t h = 0; h < 65536; h += 4) {
    alignas(16) float out[4];
    _mm_store_ps(out, isa_scalar::halves_to_floats(_mm_setr_epi32(h, h + 1, h + 2, h + 3)));
    for (uint32_t i = 0; i < 4; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]),
                std::bit_cast<uint32_t>(f16_to_f32_portable(static_cast<uint16_t>(h + i))))
          << std::hex << h + i;
    }
  }
}

// The lane forms exist on x86 only; there the float steps are never fused (no FMA in the scalar
// set's baseline), so the reference below computes exactly what the kernels must.
// y = sum over blocks, in order, of dot x (d_w x d_x) with the activations as the set's matmul
// quantises them (Q8_0, scale rounded to f16).
template <QKind K>
std::vector<float> block_sums(const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& x, int n_tokens) {
  const int64_t n_blocks = cols / 32;
  std::vector<BlockQ8_0> acts(n_blocks * n_tokens);
  quantize_row(DType::Q8_0, x.data(), acts.data(), cols * n_tokens);
  const auto* blocks = reinterpret_cast<const QBlock<K>*>(w.data());
  std::vector<float> y(rows * n_tokens);
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const BlockQ8_0& a = acts[t * n_blocks + b];
        const QBlock<K>& wb = blocks[r * n_blocks + b];
        sum += static_cast<float>(reference_dot<K>(wb, a.qs)) *
               (f16_to_f32_portable(wb.d) * f16_to_f32_portable(a.d));
      }
      y[t * rows + r] = sum;
    }
  }
  return y;
}

template <QKind K>
void expect_scalar_matmul_is_the_block_sum() {
  constexpr DType type = K == QKind::kQ8 ? DType::Q8_0 : DType::Q4_0;
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  ThreadPool pool(2);
  // Rows around the 4-row tiles, blocks around the decode's groups of 4, tokens around the
  // 2-token tiles; one thread's rows and several.
  for (int64_t rows : {1, 3, 4, 9, 70}) {
    for (int64_t cols : {32, 96, 224}) {
      std::vector<float> wf(rows * cols);
      for (auto& v : wf) v = g(rng);
      std::vector<uint8_t> w(row_bytes(type, cols) * rows);
      quantize_row(type, wf.data(), w.data(), rows * cols);
      TensorView view;
      view.type = type;
      view.n_dims = 2;
      view.ne = {cols, rows, 1, 1};
      view.data = w.data();
      view.bytes = w.size();
      for (int n_tokens : {1, 2, 5}) {
        std::vector<float> x(cols * n_tokens);
        for (auto& v : x) v = g(rng);
        std::vector<float> y(rows * n_tokens);
        isa_scalar::matmul(view, x.data(), n_tokens, y.data(), pool);
        const std::vector<float> want = block_sums<K>(w, rows, cols, x, n_tokens);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i]))
              << rows << " x " << cols << ", " << n_tokens << " tokens, output " << i;
        }
      }
    }
  }
}

TEST(BlockDotExact, ScalarSetQ8MatmulIsTheBlockSumInOrder) {
  expect_scalar_matmul_is_the_block_sum<QKind::kQ8>();
}

TEST(BlockDotExact, ScalarSetQ4MatmulIsTheBlockSumInOrder) {
  expect_scalar_matmul_is_the_block_sum<QKind::kQ4>();
}
#endif

}  // namespace
}  // namespace k25
