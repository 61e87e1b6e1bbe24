// Weights repacked at load (kernels/repack.h): the layout, matmul on it against a double
// reference, results per token independent of the other tokens of a call, and a model loaded
// from GGUF with every matmul weight repacked, on the kernel set that repacks (AVX-512); the
// others leave every weight as it is.
#include "kernels/repack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/weights.h"
#include "random_weights.h"
#include "test_paths.h"
#include "util/error.h"

namespace k25 {
namespace {

struct Matrix : testing::Weights {
  std::vector<PackedMatrix> packed;  // owns view.packed
};

// A random quantised matrix, repacked (view.packed set).
Matrix make_matrix(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  static_cast<testing::Weights&>(m) = testing::make_weights(type, rows, cols, rng);
  m.view.data = m.bytes.data();
  m.packed = repack_matrices({&m.view}, 2);
  return m;
}

std::vector<float> random_acts(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

// Only the AVX-512 kernel set repacks. Under the others (K25_ISA, or a CPU without AVX-512)
// the tests of the layout check instead that nothing is repacked and a repack is refused.
bool active_set_refuses_repack() {
  if (repack_supported(DType::Q8_0)) return false;
  EXPECT_FALSE(repack_supported(DType::Q4_0)) << kernels().isa;
  std::mt19937 rng(5);
  testing::Weights w = testing::make_weights(DType::Q8_0, 16, 64, rng);
  w.view.data = w.bytes.data();
  EXPECT_THROW(repack_matrices({&w.view}, 1), Error) << kernels().isa;
  EXPECT_EQ(w.view.packed, nullptr);
  return true;
}

TEST(RepackTest, LayoutInterleavesSixteenRowsAndPadsTheLastGroup) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(11);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const int64_t rows = 20;
    const int64_t cols = 96;
    const Matrix m = make_matrix(type, rows, cols, rng);
    ASSERT_NE(m.view.packed, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(m.view.packed) % 64, 0u);
    const auto* packed = static_cast<const uint8_t*>(m.view.packed);
    const size_t quant_bytes = packed_quant_bytes(type);
    const size_t group_bytes = packed_group_bytes(type, cols);
    const size_t block_bytes = dtype_block_bytes(type);
    const int64_t n_blocks = cols / 32;
    for (int64_t r = 0; r < 32; ++r) {
      const uint8_t* group = packed + (r / 16) * group_bytes;
      const int i = static_cast<int>(r % 16);
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint16_t scale;
        std::memcpy(&scale, group + n_blocks * quant_bytes + 2 * (16 * b + i), 2);
        const uint8_t* src = m.bytes.data() + r * row_bytes(type, cols) + b * block_bytes;
        uint16_t src_scale = 0;
        if (r < rows) std::memcpy(&src_scale, src, 2);
        EXPECT_EQ(scale, src_scale) << "row " << r << " block " << b;
        for (size_t j = 0; j < quant_bytes / 16; ++j) {
          const uint8_t got = group[b * quant_bytes + 64 * (j / 4) + 4 * i + j % 4];
          uint8_t want = type == DType::Q8_0 ? 0x80 : 0x88;  // a zero quant past the end
          if (r < rows) want = type == DType::Q8_0 ? src[2 + j] ^ 0x80 : src[2 + j];
          ASSERT_EQ(got, want) << dtype_name(type) << " row " << r << " block " << b << " byte "
                               << j;
        }
      }
    }
  }
}

TEST(RepackTest, MatmulOnPackedWeightsMatchesReference) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(12);
  ThreadPool one(1);
  ThreadPool three(3);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    for (int64_t rows : {1, 15, 16, 17, 45, 100}) {
      for (int64_t cols : {32, 96, 352}) {
        const Matrix m = make_matrix(type, rows, cols, rng);
        for (int n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 40}) {
          const std::vector<float> x = random_acts(n_tokens * cols, rng);
          testing::check_matmul(m, x, n_tokens, one);
          testing::check_matmul(m, x, n_tokens, three);
        }
      }
    }
  }
}

TEST(RepackTest, MatmulOnPackedWeightsLargeShapes) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(13);
  ThreadPool two(2);
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const Matrix m = make_matrix(type, 300, 4096, rng);
    for (int n_tokens : {1, 3, 8, 19}) {
      testing::check_matmul(m, random_acts(n_tokens * 4096, rng), n_tokens, two);
    }
  }
}

// The engine batches sequences into one call; each must get exactly what it gets alone.
TEST(RepackTest, TokenResultDoesNotDependOnTheOtherTokens) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(14);
  ThreadPool two(2);
  constexpr int kTokens = 40;
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    for (int64_t cols : {64, 2048}) {
      const int64_t rows = 70;
      const Matrix m = make_matrix(type, rows, cols, rng);
      const std::vector<float> x = random_acts(kTokens * cols, rng);
      const std::vector<float> alone = testing::lone_products(m.view, x, kTokens, two);
      for (int t0 : {0, 3}) {
        for (int n : {2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 37}) {
          testing::expect_batch_matches_lone(m.view, x, alone, t0, n, two);
        }
      }
      // Prefill on weights that were not repacked at load (repacked on the fly) is the same
      // arithmetic.
      TensorView plain = m.view;
      plain.packed = nullptr;
      std::vector<float> y(kTokens * rows);
      matmul(plain, x.data(), kTokens, y.data(), two);
      for (int i = 0; i < kTokens * rows; ++i) ASSERT_EQ(y[i], alone[i]) << "at " << i;
    }
  }
}

TEST(RepackTest, RejectsTypesItCannotRepack) {
  std::vector<float> data(64);
  TensorView f32;
  f32.name = "f32.weight";
  f32.type = DType::F32;
  f32.n_dims = 2;
  f32.ne = {32, 2, 1, 1};
  f32.data = data.data();
  f32.bytes = data.size() * sizeof(float);
  EXPECT_FALSE(repack_supported(DType::F32));
  EXPECT_THROW(repack_matrices({&f32}, 1), Error);
}

TEST(RepackTest, LoadedModelHasEveryMatmulWeightRepacked) {
  K25_REQUIRE_SHARED();
  for (const char* file : {"models/stories260K-q8_0.gguf", "models/stories260K-q4_0.gguf"}) {
    const LoadedModel m = load_gguf_model(testing::shared_path(file));
    const ModelWeights& w = m.weights;
    EXPECT_EQ(w.token_embedding.packed, nullptr) << file;
    // Every quantised matmul weight (the files keep some, like ffn_down, in float).
    int n_packed = 0;
    const auto check = [&](const TensorView& t) {
      EXPECT_EQ(t.packed != nullptr, repack_supported(t.type)) << file << " " << t.name;
      n_packed += t.packed != nullptr;
    };
    check(w.output);
    for (const LayerWeights& L : w.layers) {
      for (const TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
        check(*t);
      }
    }
    EXPECT_EQ(n_packed > 0, repack_supported(DType::Q8_0)) << file << " " << kernels().isa;
    // The embedding rows are still readable (the output matrix may be tied to it).
    std::vector<float> row(w.token_embedding.row_length());
    dequantize_row(w.token_embedding.type, w.token_embedding.data, row.data(),
                   w.token_embedding.row_length());
  }
}

}  // namespace
}  // namespace k25
