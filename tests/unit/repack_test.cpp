// Weights repacked at load (kernels/repack.h): the layout, matmul on it against a double
// reference (Q4_K, Q6_K: against the file-layout kernels), results per token independent of the
// other tokens of a call, and a model loaded from GGUF with every matmul weight repacked, on the
// kernel sets that repack (all but scalar); the scalar set leaves every weight as it is.
#include "kernels/repack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "model/weights.h"
#include "random_weights.h"
#include "test_paths.h"

namespace k25 {
namespace {

struct Matrix : testing::Weights {
  PackedWeights packed;  // owns view.packed
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

// Every kernel set but the scalar one repacks. Under the scalar set (K25_ISA=scalar) the tests
// of the layout check instead that nothing is repacked and a repack is refused.
bool active_set_refuses_repack() {
  if (repack_supported(DType::Q8_0)) {
    EXPECT_TRUE(repack_supported(DType::Q4_K)) << kernels().isa;
    EXPECT_TRUE(repack_supported(DType::Q5_K)) << kernels().isa;
    EXPECT_TRUE(repack_supported(DType::Q6_K)) << kernels().isa;
    return false;
  }
  EXPECT_FALSE(repack_supported(DType::Q4_0)) << kernels().isa;
  EXPECT_FALSE(repack_supported(DType::Q4_K)) << kernels().isa;
  EXPECT_FALSE(repack_supported(DType::Q5_K)) << kernels().isa;
  EXPECT_FALSE(repack_supported(DType::Q6_K)) << kernels().isa;
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
  // Q8_0 quants are offset by +128 for dpbusd on the VNNI sets; the avx2 set keeps them signed.
  const uint8_t q8_flip = std::string_view(kernels().isa) == "avx2" ? 0 : 0x80;
  for (DType type : {DType::Q8_0, DType::Q4_0}) {
    const int64_t rows = 20;
    const int64_t cols = 96;
    const Matrix m = make_matrix(type, rows, cols, rng);
    ASSERT_NE(m.view.packed, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(m.view.packed) % 64, 0u);
    const auto* packed = static_cast<const uint8_t*>(m.view.packed);
    const size_t quant_bytes = packed_quant_bytes(type);
    const size_t group_bytes = packed_group_bytes(type, cols);
    // Blocks in units of four, each unit's quants and then its scales: one stream per group.
    const int64_t unit_blocks = 4;
    const size_t unit_bytes = unit_blocks * (quant_bytes + 32);
    EXPECT_EQ(group_bytes, ((cols / 32 + unit_blocks - 1) / unit_blocks) * unit_bytes);
    const size_t block_bytes = dtype_block_bytes(type);
    const int64_t n_blocks = cols / 32;
    for (int64_t r = 0; r < 32; ++r) {
      const uint8_t* group = packed + (r / 16) * group_bytes;
      const int i = static_cast<int>(r % 16);
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint16_t scale;
        const uint8_t* unit = group + (b / unit_blocks) * unit_bytes;
        const int64_t in_unit = b % unit_blocks;
        std::memcpy(&scale, unit + unit_blocks * quant_bytes + 32 * in_unit + 2 * i, 2);
        const uint8_t* src = m.bytes.data() + r * row_bytes(type, cols) + b * block_bytes;
        uint16_t src_scale = 0;
        if (r < rows) std::memcpy(&src_scale, src, 2);
        EXPECT_EQ(scale, src_scale) << "row " << r << " block " << b;
        for (size_t j = 0; j < quant_bytes / 16; ++j) {
          const uint8_t got = unit[in_unit * quant_bytes + 64 * (j / 4) + 4 * i + j % 4];
          uint8_t want = type == DType::Q8_0 ? q8_flip : 0x88;  // a zero quant past the end
          if (r < rows) want = type == DType::Q8_0 ? src[2 + j] ^ q8_flip : src[2 + j];
          ASSERT_EQ(got, want) << dtype_name(type) << " row " << r << " block " << b << " byte "
                               << j;
        }
      }
    }
    if (type == DType::Q8_0) {  // no quant of -128 in either group
      EXPECT_EQ(packed[packed_q8_minimum_flags(rows, cols)], 0);
      EXPECT_EQ(packed[packed_q8_minimum_flags(rows, cols) + 1], 0);
    }
    // 3 blocks: the last unit's missing block (block 3) is zeros, quants and scales.
    for (int64_t g = 0; g < 2; ++g) {
      const uint8_t* last_unit = packed + g * group_bytes + (3 / unit_blocks) * unit_bytes;
      const int64_t missing = 3 % unit_blocks;
      for (size_t k = 0; k < quant_bytes; ++k) {
        ASSERT_EQ(last_unit[missing * quant_bytes + k], 0) << k;
      }
      for (size_t k = 0; k < 32; ++k) {
        ASSERT_EQ(last_unit[unit_blocks * quant_bytes + 32 * missing + k], 0) << k;
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

// One call repacks several matrices into one buffer: each copy starts 64-byte aligned, inside
// the buffer and after the previous one ends, and each gives its own exact products (a Q8_0
// matrix of 17 rows ends in 2 flag bytes, so the next one must be realigned).
TEST(RepackTest, SeveralMatricesShareOneBufferInOrder) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(14);
  ThreadPool two(2);
  std::vector<testing::Weights> ws;
  ws.push_back(testing::make_weights(DType::Q8_0, 17, 96, rng));
  ws.push_back(testing::make_weights(DType::Q4_0, 45, 352, rng));
  ws.push_back(testing::make_weights(DType::Q8_0, 1, 32, rng));
  ws.push_back(testing::make_weights(DType::Q4_0, 16, 64, rng));
  std::vector<TensorView*> views;
  for (testing::Weights& w : ws) {
    w.view.data = w.bytes.data();
    views.push_back(&w.view);
  }
  const PackedWeights packed = repack_matrices(views, 2);
  const auto* begin = static_cast<const uint8_t*>(packed.data());
  const uint8_t* previous_end = begin;
  for (const testing::Weights& w : ws) {
    const auto* p = static_cast<const uint8_t*>(w.view.packed);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_GE(p, previous_end);
    previous_end = p + packed_matrix_bytes(w.view.type, w.view.n_rows(), w.view.row_length());
    EXPECT_LE(previous_end, begin + packed.bytes());
  }
  for (const testing::Weights& w : ws) {
    for (int n_tokens : {1, 3, 17}) {
      testing::check_matmul(w, random_acts(n_tokens * w.view.row_length(), rng), n_tokens, two);
    }
  }
}

// Builds a 20 x 512 matrix of `type` (two super-blocks per row, a padded second group) and calls
// check(r, i, sb, src) for rows r < 32 and each super-block: sb is the packed super-block that
// holds row r as row i of its group, src the file's block of that row (zero past the last row).
template <typename Check>
void each_packed_super_block(DType type, size_t super_bytes, uint32_t seed, const Check& check) {
  std::mt19937 rng(seed);
  const int64_t rows = 20;
  const int64_t cols = 512;
  const Matrix m = make_matrix(type, rows, cols, rng);
  ASSERT_NE(m.view.packed, nullptr);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(m.view.packed) % 64, 0u);
  const size_t group_bytes = packed_group_bytes(type, cols);
  ASSERT_EQ(group_bytes, 2 * super_bytes);
  const auto* packed = static_cast<const uint8_t*>(m.view.packed);
  const size_t block_bytes = dtype_block_bytes(type);
  for (int64_t r = 0; r < 32; ++r) {
    for (int64_t b = 0; b < cols / 256; ++b) {
      std::vector<uint8_t> src(block_bytes, 0);
      if (r < rows) {
        std::memcpy(src.data(), m.bytes.data() + r * row_bytes(type, cols) + block_bytes * b,
                    block_bytes);
      }
      check(r, static_cast<int>(r % 16), packed + (r / 16) * group_bytes + b * super_bytes,
            src.data());
    }
  }
}

// n 4-byte pieces from `at` in sb: piece p holds bytes [4p, 4p + 4) of src_bytes for row i.
void expect_pieces(const uint8_t* sb, size_t at, int n, int i, int64_t r,
                   const uint8_t* src_bytes) {
  for (int p = 0; p < n; ++p) {
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(sb[at + 64 * p + 4 * i + k], src_bytes[4 * p + k]) << "row " << r << " piece " << p;
    }
  }
}

// Q4_K / Q5_K: the 6-bit scales and minimums (as llama.cpp's get_scale_min_k4 reads them from
// the file's 12 bytes at src + 4) unpacked at `meta`, then d and dmin (src's first 4 bytes).
void expect_k4_meta(const uint8_t* sb, size_t meta, int i, int64_t r, const uint8_t* src) {
  const uint8_t* q = src + 4;
  for (int s = 0; s < 8; ++s) {
    const int sc = s < 4 ? q[s] & 63 : (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4);
    const int mn = s < 4 ? q[s + 4] & 63 : (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
    EXPECT_EQ(sb[meta + 16 * s + i], sc) << "row " << r << " sub-block " << s;
    EXPECT_EQ(sb[meta + 128 + 32 * (s / 2) + 2 * i + s % 2], mn) << "row " << r << " " << s;
  }
  EXPECT_EQ(std::memcmp(sb + meta + 256 + 2 * i, src, 2), 0) << "d of row " << r;
  EXPECT_EQ(std::memcmp(sb + meta + 256 + 32 + 2 * i, src + 2, 2), 0) << "dmin of row " << r;
}

// Q4_K groups: one run of kPackedQ4kSuperBytes per super-block (kernels/repack.h). The file's
// block: d, dmin (f16), 12 bytes of scales and minimums, 128 quant bytes.
TEST(RepackTest, Q4kLayoutInterleavesSixteenRowsAndPadsTheLastGroup) {
  if (active_set_refuses_repack()) return;
  each_packed_super_block(DType::Q4_K, kPackedQ4kSuperBytes, 15,
                          [](int64_t r, int i, const uint8_t* sb, const uint8_t* src) {
                            expect_pieces(sb, 0, 32, i, r, src + 16);
                            expect_k4_meta(sb, 2048, i, r, src);
                          });
}

// Q5_K: Q4_K's layout with the 32 qh bytes of each row as 8 pieces after the 32 quant pieces.
// The file's block: d, dmin, 12 bytes of scales and minimums, qh[32], qs[128].
TEST(RepackTest, Q5kLayoutInterleavesSixteenRowsAndPadsTheLastGroup) {
  if (active_set_refuses_repack()) return;
  each_packed_super_block(DType::Q5_K, kPackedQ5kSuperBytes, 18,
                          [](int64_t r, int i, const uint8_t* sb, const uint8_t* src) {
                            expect_pieces(sb, 0, 32, i, r, src + 48);
                            expect_pieces(sb, 2048, 8, i, r, src + 16);
                            expect_k4_meta(sb, 2560, i, r, src);
                          });
}

// Q6_K. The file's block: ql[128], qh[64], int8 scales[16], f16 d. The group holds the quants
// as A, B and C (kernels/repack.h), checked here by rebuilding every 6-bit quant from them.
TEST(RepackTest, Q6kLayoutInterleavesSixteenRowsAndPadsTheLastGroup) {
  if (active_set_refuses_repack()) return;
  each_packed_super_block(
      DType::Q6_K, kPackedQ6kSuperBytes, 17,
      [](int64_t r, int i, const uint8_t* sb, const uint8_t* src) {
        const uint8_t* ql = src;
        const uint8_t* qh = src + 128;
        for (int n = 0; n < 2; ++n) {
          for (int l = 0; l < 32; ++l) {
            const size_t at = 64 * (8 * n + l / 4) + 4 * i + l % 4;
            const int a = sb[at], b = sb[1024 + at], c = sb[2048 + at];
            const int h = qh[32 * n + l];
            // The file's quants of groups e = 0..3 (llama.cpp's reference).
            const int want[4] = {(ql[64 * n + l] & 15) | (h & 3) << 4,
                                 (ql[64 * n + 32 + l] & 15) | (h >> 2 & 3) << 4,
                                 (ql[64 * n + l] >> 4) | (h >> 4 & 3) << 4,
                                 (ql[64 * n + 32 + l] >> 4) | (h >> 6 & 3) << 4};
            const int got[4] = {a & 63, b & 63, (c & 15) | (a >> 2 & 48), (c >> 4) | (b >> 2 & 48)};
            for (int e = 0; e < 4; ++e) {
              ASSERT_EQ(got[e], want[e]) << "row " << r << " n " << n << " e " << e << " l " << l;
            }
          }
        }
        for (int s = 0; s < 16; ++s) {
          EXPECT_EQ(sb[3072 + 32 * (s / 2) + 2 * i + s % 2], src[192 + s])
              << "row " << r << " " << s;
        }
        uint16_t d16;
        std::memcpy(&d16, src + 208, 2);
        float d;
        std::memcpy(&d, sb + 3072 + 256 + 4 * i, 4);
        EXPECT_EQ(d, f16_to_f32(d16)) << "d of row " << r;
      });
}

// The packed K-quant kernels take the integer steps of the file-layout kernels (block_types.h)
// and only sum the floats in another order.
TEST(RepackTest, KQuantMatmulOnPackedWeightsMatchesTheFileLayoutKernel) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(16);
  ThreadPool one(1);
  ThreadPool three(3);
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t rows : {1, 15, 16, 17, 45, 100}) {
      for (int64_t cols : {256, 768}) {
        const Matrix m = make_matrix(type, rows, cols, rng);
        TensorView plain = m.view;
        plain.packed = nullptr;
        for (int n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 40}) {
          const std::vector<float> x = random_acts(n_tokens * cols, rng);
          std::vector<float> want(n_tokens * rows);
          matmul(plain, x.data(), n_tokens, want.data(), one);
          for (ThreadPool* pool : {&one, &three}) {
            std::vector<float> got(n_tokens * rows, NAN);
            matmul(m.view, x.data(), n_tokens, got.data(), *pool);
            for (int t = 0; t < n_tokens; ++t) {
              for (int64_t r = 0; r < rows; ++r) {
                double mag = 0.0;
                for (int64_t c = 0; c < cols; ++c) {
                  mag += std::fabs(double{m.dequantised[r * cols + c]} * x[t * cols + c]);
                }
                ASSERT_NEAR(got[t * rows + r], want[t * rows + r], 1e-6 * mag)
                    << dtype_name(type) << " rows " << rows << " cols " << cols << " tokens "
                    << n_tokens << " threads " << pool->size() << " at token " << t << " row " << r;
              }
            }
          }
        }
      }
    }
  }
}

// q/k/v and gate/up share their input: quantised once and run as one parallel section, each
// product must be the very bits a matmul of its own gives, for repacked K-quants of every type
// (one quantisation serves them all), for Q8_0 and Q4_0 sets of one type (rows not a multiple
// of the 16-row groups, so chunks straddle matrices and partial groups), and for sets that
// cannot share (K-quant and Q8_0, or Q8_0 and Q4_0) or need not (one matrix).
TEST(RepackTest, ProductsOfOneInputEqualEachProductAlone) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(18);
  ThreadPool two(2);
  const int64_t cols = 512;
  std::vector<Matrix> ms;
  for (const auto& [type, rows] : std::vector<std::pair<DType, int64_t>>{{DType::Q4_K, 70},
                                                                         {DType::Q6_K, 45},
                                                                         {DType::Q5_K, 70},
                                                                         {DType::Q8_0, 70},
                                                                         {DType::Q8_0, 37},
                                                                         {DType::Q4_0, 70},
                                                                         {DType::Q4_0, 17}}) {
    ms.push_back(make_matrix(type, rows, cols, rng));
  }
  const std::vector<std::vector<const Matrix*>> sets = {
      {&ms[0], &ms[1], &ms[2]}, {&ms[1], &ms[0]},         {&ms[0], &ms[3]}, {&ms[0]},
      {&ms[3], &ms[4], &ms[3]}, {&ms[6], &ms[5], &ms[6]}, {&ms[3], &ms[5]}};
  for (int n_tokens : {1, 2, 5, 40}) {
    const std::vector<float> x = random_acts(n_tokens * cols, rng);
    for (const auto& set : sets) {
      std::vector<const TensorView*> ws;
      std::vector<std::vector<float>> want, got;
      for (const Matrix* m : set) {
        ws.push_back(&m->view);
        want.emplace_back(n_tokens * m->view.n_rows());
        matmul(m->view, x.data(), n_tokens, want.back().data(), two);
        got.emplace_back(want.back().size(), NAN);
      }
      std::vector<float*> ys;
      for (auto& g : got) ys.push_back(g.data());
      matmul_same_input(ws.data(), ys.data(), static_cast<int>(ws.size()), x.data(), n_tokens, two);
      for (size_t i = 0; i < set.size(); ++i) {
        EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0)
            << dtype_name(set[i]->view.type) << " at " << i << " of " << set.size() << ", "
            << n_tokens << " tokens";
      }
    }
  }
}

// The engine batches sequences into one call; each must get exactly what it gets alone.
TEST(RepackTest, TokenResultDoesNotDependOnTheOtherTokens) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(14);
  ThreadPool two(2);
  constexpr int kTokens = 40;
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    for (int64_t cols : {256, 2048}) {
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
      // arithmetic. (K-quant weights not repacked at load are read as the file has them.)
      if (type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K) continue;
      TensorView plain = m.view;
      plain.packed = nullptr;
      std::vector<float> y(kTokens * rows);
      matmul(plain, x.data(), kTokens, y.data(), two);
      for (int i = 0; i < kTokens * rows; ++i) ASSERT_EQ(y[i], alone[i]) << "at " << i;
    }
  }
}

// A Q8_0 quant of -128 (which llama.cpp's and k25's quantisers never write, but a file may hold)
// times a negative activation: the avx2 set's tiles on repacked weights move x's sign onto the
// weight, where -(-128) does not fit, so that set reads the groups flagged as holding one the
// other way (kernels/repack.h), in decode and prefill. Here the first of three groups holds some.
TEST(RepackTest, Q8QuantsOfMinus128GiveExactProducts) {
  if (active_set_refuses_repack()) return;
  std::mt19937 rng(19);
  ThreadPool two(2);
  const int64_t rows = 40, cols = 256;
  Matrix m;
  static_cast<testing::Weights&>(m) = testing::make_weights(DType::Q8_0, rows, cols, rng);
  const size_t rb = row_bytes(DType::Q8_0, cols);
  for (int64_t r = 0; r < 16; r += 3) {
    uint8_t* row = m.bytes.data() + r * rb;
    for (int64_t b = 0; b < cols / 32; ++b) {
      for (int64_t j : {(r + b) % 32, (r + 5 * b + 7) % 32}) {
        row[b * dtype_block_bytes(DType::Q8_0) + 2 + j] = 0x80;
      }
    }
    dequantize_row(DType::Q8_0, row, m.dequantised.data() + r * cols, cols);
  }
  m.view.data = m.bytes.data();
  m.packed = repack_matrices({&m.view}, 2);
  const auto* flags =
      static_cast<const uint8_t*>(m.view.packed) + packed_q8_minimum_flags(rows, cols);
  EXPECT_EQ(packed_matrix_bytes(DType::Q8_0, rows, cols), packed_q8_minimum_flags(rows, cols) + 3);
  EXPECT_GE(m.packed.bytes(), packed_matrix_bytes(DType::Q8_0, rows, cols));
  EXPECT_EQ(flags[0], 1);
  EXPECT_EQ(flags[1], 0);
  EXPECT_EQ(flags[2], 0);
  for (int n_tokens : {1, 2, 3, 5, 17}) {
    testing::check_matmul(m, random_acts(n_tokens * cols, rng), n_tokens, two);
  }
  const std::vector<float> x = random_acts(20 * cols, rng);
  const std::vector<float> alone = testing::lone_products(m.view, x, 20, two);
  for (int n : {2, 3, 17, 20}) testing::expect_batch_matches_lone(m.view, x, alone, 0, n, two);
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
