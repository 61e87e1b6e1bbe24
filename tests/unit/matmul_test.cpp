// matmul against a double-precision reference on the dequantised weights, for every weight type,
// shapes that are not multiples of the register tiles, and 1 or 3 threads. For quantised weights
// the reference also uses the activations after a Q8_0 round trip, which is what the kernels
// multiply, so the comparison can be tight.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/quant.h"
#include "random_weights.h"

namespace k25 {
namespace {

using testing::check_matmul;
using testing::expect_batch_matches_lone;
using testing::lone_products;
using testing::make_weights;
using testing::Weights;

std::vector<float> random_acts(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

TEST(MatmulTest, AllTypesOddShapes) {
  std::mt19937 rng(1);
  ThreadPool one(1);
  ThreadPool three(3);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    for (int64_t rows : {1, 2, 3, 5, 8, 13, 17, 31, 67}) {
      for (int64_t cols : {32, 96, 256}) {
        const Weights w = make_weights(type, rows, cols, rng);
        for (int n_tokens : {1, 2, 3, 4, 5, 7, 9}) {
          const std::vector<float> x = random_acts(n_tokens * cols, rng);
          check_matmul(w, x, n_tokens, one);
          check_matmul(w, x, n_tokens, three);
        }
      }
    }
  }
}

// A token's result must not depend on the other tokens of the call (decode of one sequence,
// batched decode, prefill chunks and a recompute after preemption all give the same bits).
TEST(MatmulTest, FloatTokenResultDoesNotDependOnTheOtherTokens) {
  std::mt19937 rng(15);
  ThreadPool two(2);
  constexpr int kTokens = 11;
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : {40, 2048}) {
      const int64_t rows = 70;
      const Weights w = make_weights(type, rows, cols, rng);
      const std::vector<float> x = random_acts(kTokens * cols, rng);
      const std::vector<float> alone = lone_products(w.view, x, kTokens, two);
      for (int n : {2, 3, 4, 5, 11}) expect_batch_matches_lone(w.view, x, alone, 0, n, two);
    }
  }
}

TEST(MatmulTest, FloatRowsNotMultipleOfVectorWidth) {
  std::mt19937 rng(2);
  ThreadPool three(3);
  for (DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : {1, 7, 13, 172}) {
      for (int64_t rows : {1, 6, 37}) {
        const Weights w = make_weights(type, rows, cols, rng);
        for (int n_tokens : {1, 3, 6})
          check_matmul(w, random_acts(n_tokens * cols, rng), n_tokens, three);
      }
    }
  }
}

TEST(MatmulTest, LargeShapesUseManyChunksAndParallelQuantisation) {
  std::mt19937 rng(3);
  ThreadPool three(3);
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::F16}) {
    const Weights w = make_weights(type, 300, 4096, rng);
    check_matmul(w, random_acts(17 * 4096, rng), 17, three);
    check_matmul(w, random_acts(4096, rng), 1, three);
  }
}

TEST(MatmulTest, ExtremeQuantsFromFiles) {
  // GGUF files may hold Q8_0 quants of -128 and Q4_0 nibbles at both ends, which the
  // quantiser never writes; the kernels must still be exact for them.
  std::mt19937 rng(4);
  ThreadPool three(3);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    Weights w = make_weights(type, 9, 128, rng);
    const size_t block = dtype_block_bytes(type);
    for (size_t b = 0; b < w.bytes.size() / block; ++b) {
      uint8_t* p = w.bytes.data() + b * block;
      for (size_t j = 2; j < block; ++j)
        p[j] = (b + j) % 3 == 0 ? 0x80 : (b + j) % 3 == 1 ? 0x7f : 0x0f;
    }
    const int64_t cols = 128;
    for (int64_t r = 0; r < 9; ++r)
      dequantize_row(type, w.bytes.data() + r * row_bytes(type, cols),
                     w.dequantised.data() + r * cols, cols);
    std::vector<float> x = random_acts(5 * cols, rng);
    for (int64_t c = 0; c < cols; c += 3) x[c] = (c % 2 ? 1.0f : -1.0f) * 50.0f;  // quants at +-127
    check_matmul(w, x, 5, three);
    check_matmul(w, x, 1, three);
    // Prefill (16 tokens or more) takes the repacked path on AVX-512 VNNI.
    std::vector<float> many = random_acts(19 * cols, rng);
    for (int64_t c = 0; c < 19 * cols; c += 3) many[c] = (c % 2 ? 1.0f : -1.0f) * 50.0f;
    check_matmul(w, many, 19, three);
  }
}

TEST(MatmulTest, PrefillTokenTailsAndRowGroupTails) {
  // Token counts around the 8-token tiles and the 128-token spans, rows around the 16-row
  // groups of the repacked layout.
  std::mt19937 rng(7);
  ThreadPool one(1);
  ThreadPool three(3);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    for (int64_t rows : {1, 15, 16, 17, 67}) {
      for (int64_t cols : {32, 352}) {
        const Weights w = make_weights(type, rows, cols, rng);
        for (int n_tokens : {16, 23, 137}) {
          const std::vector<float> x = random_acts(n_tokens * cols, rng);
          check_matmul(w, x, n_tokens, one);
          check_matmul(w, x, n_tokens, three);
        }
      }
    }
  }
}

TEST(MatmulTest, ZeroActivationsGiveZero) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::F32}) {
    const Weights w = make_weights(type, 10, 64, rng);
    std::vector<float> x(3 * 64, 0.0f);
    std::vector<float> y(30, 1.0f);
    matmul(w.view, x.data(), 3, y.data(), pool);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

TEST(MatmulTest, RejectsBadWeights) {
  std::mt19937 rng(6);
  ThreadPool pool(1);
  Weights w = make_weights(DType::Q8_0, 4, 64, rng);
  std::vector<float> x(64, 1.0f);
  std::vector<float> y(4);
  TensorView short_view = w.view;
  short_view.bytes -= 1;
  EXPECT_THROW(matmul(short_view, x.data(), 1, y.data(), pool), Error);
  TensorView odd = w.view;
  odd.ne = {48, 4, 1, 1};
  EXPECT_THROW(matmul(odd, x.data(), 1, y.data(), pool), Error);
  TensorView unknown = w.view;
  unknown.type = static_cast<DType>(16);  // IQ2_XXS: k25 has no kernels for it
  EXPECT_THROW(matmul(unknown, x.data(), 1, y.data(), pool), Error);
  TensorView no_data = w.view;
  no_data.data = nullptr;
  EXPECT_THROW(matmul(no_data, x.data(), 1, y.data(), pool), Error);
}

}  // namespace
}  // namespace k25
