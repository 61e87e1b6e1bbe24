// The K-quants Q2_K..Q6_K: dequantisation of hand-built blocks, vec_dot against a
// double-precision dot of the dequantised rows, the AVX2 dot against the portable one, dot_tile
// and matmul against vec_dot (bitwise), and the encoders' round-trip error and determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/block_types.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/set/kquant_blocks.h"
#include "test_paths.h"

namespace k25 {
namespace {

// The scalar kernel set's K-quant blocks and portable dot products, the yardstick of the others.
using namespace isa_scalar;

struct KType {
  DType type;
  float (*scalar_dot)(const void*, const void*, int64_t);
  size_t d_offset;  // f16 super-block scale
  int dmin_offset;  // f16 minimum scale, -1 where the type has none
  // Round trip of N(0, 1) data, relative to its RMS (about what llama.cpp's encoders give, see
  // KQuantFiles below); 0: no encoder.
  float max_rms_error;
};

const KType kTypes[] = {
    {DType::Q2_K, &vec_dot_q2_k_scalar, offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin), 0.0f},
    {DType::Q3_K, &vec_dot_q3_k_scalar, offsetof(BlockQ3_K, d), -1, 0.0f},
    {DType::Q4_K, &vec_dot_q4_k_scalar, offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin), 0.08f},
    {DType::Q5_K, &vec_dot_q5_k_scalar, offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin), 0.04f},
    {DType::Q6_K, &vec_dot_q6_k_scalar, offsetof(BlockQ6_K, d), -1, 0.02f},
};

std::string type_name(const ::testing::TestParamInfo<KType>& info) {
  return dtype_name(info.param.type);
}

// Random quant and scale bytes with the f16 super-block scales set to small positive values.
std::vector<uint8_t> random_row(const KType& k, int64_t n, std::mt19937& rng) {
  const size_t bytes = row_bytes(k.type, n);
  const size_t block = dtype_block_bytes(k.type);
  std::vector<uint8_t> row(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
  for (size_t off = 0; off < bytes; off += block) {
    const uint16_t d = f32_to_f16(scale(rng));
    std::memcpy(row.data() + off + k.d_offset, &d, 2);
    if (k.dmin_offset >= 0) {
      const uint16_t dmin = f32_to_f16(scale(rng));
      std::memcpy(row.data() + off + k.dmin_offset, &dmin, 2);
    }
  }
  return row;
}

std::vector<float> normal_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> g(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = g(rng);
  return x;
}

std::vector<uint8_t> q8_k_acts(const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> a(act_row_bytes(ActFormat::kQ8_K, n));
  quantize_acts(ActFormat::kQ8_K, x.data(), a.data(), n);
  return a;
}

class KQuantTest : public ::testing::TestWithParam<KType> {};

TEST_P(KQuantTest, VecDotMatchesDoubleDotOfDequantisedRows) {
  const KType& k = GetParam();
  const BlockTypeKernels* kern = block_type_kernels(k.type);
  ASSERT_NE(kern, nullptr);
  EXPECT_EQ(kern->act, ActFormat::kQ8_K);
  std::mt19937 rng(7);
  for (int64_t n : {256, 768, 2048}) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<uint8_t> w = random_row(k, n, rng);
      const std::vector<uint8_t> a = q8_k_acts(normal_floats(n, rng));
      std::vector<float> wf(n);
      dequantize_row(k.type, w.data(), wf.data(), n);
      const auto* xb = reinterpret_cast<const BlockQ8_K*>(a.data());
      double ref = 0.0, mag = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double p = double{wf[i]} * xb[i / kQK].d * xb[i / kQK].qs[i % kQK];
        ref += p;
        mag += std::fabs(p);
      }
      const float scalar = k.scalar_dot(w.data(), a.data(), n);
      ASSERT_NEAR(scalar, ref, 1e-6 * mag) << "n " << n << " trial " << trial;
      // The AVX2 form (where built) sums the same integers: bitwise the same result.
      ASSERT_EQ(kern->vec_dot(w.data(), a.data(), n), scalar) << "n " << n << " trial " << trial;
    }
  }
}

TEST_P(KQuantTest, DotTileIsBitwiseVecDot) {
  const KType& k = GetParam();
  const BlockTypeKernels* kern = block_type_kernels(k.type);
  ASSERT_NE(kern->dot_tile, nullptr);
  std::mt19937 rng(11);
  const int64_t n = 512;
  const size_t wrb = row_bytes(k.type, n), arb = act_row_bytes(ActFormat::kQ8_K, n);
  std::vector<uint8_t> w, a;
  for (int r = 0; r < 4; ++r) {
    const std::vector<uint8_t> row = random_row(k, n, rng);
    w.insert(w.end(), row.begin(), row.end());
  }
  for (int t = 0; t < 4; ++t) {
    const std::vector<uint8_t> act = q8_k_acts(normal_floats(n, rng));
    a.insert(a.end(), act.begin(), act.end());
  }
  const int64_t stride = 7;
  for (int nr = 1; nr <= 4; ++nr) {
    for (int nt = 1; nt <= 4; ++nt) {
      std::vector<float> y(4 * stride, NAN);
      kern->dot_tile(w.data(), wrb, nr, a.data(), arb, nt, n, y.data(), stride);
      for (int t = 0; t < 4; ++t) {
        for (int r = 0; r < stride; ++r) {
          if (t < nt && r < nr) {
            ASSERT_EQ(y[t * stride + r], kern->vec_dot(w.data() + r * wrb, a.data() + t * arb, n))
                << nr << "x" << nt << " at row " << r << " token " << t;
          } else {
            ASSERT_TRUE(std::isnan(y[t * stride + r])) << "wrote outside the tile";
          }
        }
      }
    }
  }
}

// matmul gives each (row, token) vec_dot's bits, whatever the batch and the thread count.
TEST_P(KQuantTest, MatmulIsVecDotInAnyBatch) {
  const KType& k = GetParam();
  const BlockTypeKernels* kern = block_type_kernels(k.type);
  std::mt19937 rng(13);
  const int64_t rows = 37, cols = 512;
  const size_t wrb = row_bytes(k.type, cols);
  std::vector<uint8_t> w;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = random_row(k, cols, rng);
    w.insert(w.end(), row.begin(), row.end());
  }
  TensorView view;
  view.name = "test.weight";
  view.type = k.type;
  view.n_dims = 2;
  view.ne = {cols, rows, 1, 1};
  view.data = w.data();
  view.bytes = w.size();
  const int n_tokens = 9;
  const std::vector<float> x = normal_floats(n_tokens * cols, rng);
  ThreadPool one(1), three(3);
  for (ThreadPool* pool : {&one, &three}) {
    for (int batch : {1, 2, 5, 9}) {
      for (int t0 = 0; t0 + batch <= n_tokens; t0 += batch) {
        std::vector<float> y(batch * rows);
        matmul(view, x.data() + t0 * cols, batch, y.data(), *pool);
        for (int t = 0; t < batch; ++t) {
          const std::vector<float> xt(x.begin() + (t0 + t) * cols, x.begin() + (t0 + t + 1) * cols);
          const std::vector<uint8_t> a = q8_k_acts(xt);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[t * rows + r], kern->vec_dot(w.data() + r * wrb, a.data(), cols))
                << "batch " << batch << " token " << t0 + t << " row " << r;
          }
        }
      }
    }
  }
}

TEST_P(KQuantTest, EncoderRoundTripIsCloseAndDeterministic) {
  const KType& k = GetParam();
  std::mt19937 rng(17);
  const int64_t n = 4096;
  std::vector<float> x = normal_floats(n, rng);
  if (k.max_rms_error == 0.0f) {  // k25 only reads the type: one clear error
    std::vector<uint8_t> q(row_bytes(k.type, n));
    EXPECT_THROW(quantize_row(k.type, x.data(), q.data(), n), Error);
    return;
  }
  for (int64_t i = 0; i < 256; ++i) x[i] *= 8.0f;   // one super-block with a wider spread
  for (int64_t i = 256; i < 512; ++i) x[i] = 0.0f;  // and one of zeros
  std::vector<uint8_t> q(row_bytes(k.type, n)), q2(q.size());
  quantize_row(k.type, x.data(), q.data(), n);
  quantize_row(k.type, x.data(), q2.data(), n);
  EXPECT_EQ(q, q2);
  std::vector<float> back(n);
  dequantize_row(k.type, q.data(), back.data(), n);
  for (int64_t i = 256; i < 512; ++i) ASSERT_EQ(back[i], 0.0f) << i;
  double err = 0.0, energy = 0.0;
  for (int64_t i = 512; i < n; ++i) {
    err += (back[i] - x[i]) * (back[i] - x[i]);
    energy += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(err / energy), k.max_rms_error);
  double err_wide = 0.0, energy_wide = 0.0;
  for (int64_t i = 0; i < 256; ++i) {
    err_wide += (back[i] - x[i]) * (back[i] - x[i]);
    energy_wide += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(err_wide / energy_wide), k.max_rms_error);
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantTest, ::testing::ValuesIn(kTypes), type_name);

uint16_t half(float f) {
  return f32_to_f16(f);
}

// llama.cpp's quantize_row_q8_K written out here, the definition the dispatched (vectorised)
// quantiser must reproduce byte for byte.
BlockQ8_K q8_k_definition(const float* x) {
  BlockQ8_K y{};
  float max = 0.0f, amax = 0.0f;
  for (int j = 0; j < 256; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) return y;
  const float iscale = -127.0f / max;
  for (int j = 0; j < 256; ++j) {
    if (std::isnan(x[j])) continue;  // its byte is unspecified
    y.qs[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * x[j]))));
  }
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += y.qs[16 * j + i];
    y.bsums[j] = static_cast<int16_t>(sum);
  }
  y.d = 1.0f / iscale;
  return y;
}

TEST(Q8KActs, AreLlamaCppsQuantiserByteForByte) {
  std::mt19937 rng(11);
  std::vector<std::vector<float>> blocks;
  for (int i = 0; i < 40; ++i) blocks.push_back(normal_floats(256, rng, i % 2 ? 1.0f : 1e-3f));
  // The largest magnitude twice with opposite signs: the first one sets the scale's sign.
  for (int first : {3, 200}) {
    std::vector<float> x = normal_floats(256, rng, 0.1f);
    x[first] = 2.0f;
    x[first == 3 ? 200 : 3] = -2.0f;
    blocks.push_back(x);
  }
  // Halves: products that land on .5 round to even.
  std::vector<float> halves(256);
  for (int j = 0; j < 256; ++j) halves[j] = static_cast<float>(j % 255 - 127) * 0.5f;
  halves[0] = -127.0f;
  blocks.push_back(halves);
  blocks.emplace_back(256, 0.0f);  // all zero
  std::vector<float> nan_one = normal_floats(256, rng);
  nan_one[17] = std::nanf("");  // NaN is skipped by the largest-magnitude scan
  blocks.push_back(nan_one);

  for (size_t i = 0; i < blocks.size(); ++i) {
    BlockQ8_K got;
    std::memset(&got, 0x5a, sizeof(got));
    quantize_acts(ActFormat::kQ8_K, blocks[i].data(), &got, 256);
    const BlockQ8_K want = q8_k_definition(blocks[i].data());
    if (i + 1 == blocks.size()) {  // the NaN's own byte is unspecified
      got.qs[17] = want.qs[17];
      got.bsums[1] = want.bsums[1];
    }
    EXPECT_EQ(std::memcmp(got.qs, want.qs, sizeof(want.qs)), 0) << "block " << i;
    EXPECT_EQ(std::memcmp(got.bsums, want.bsums, sizeof(want.bsums)), 0) << "block " << i;
    EXPECT_EQ(got.d, want.d) << "block " << i;
  }
}

TEST(KQuantDequantize, Q6_KHandBuiltBlock) {
  BlockQ6_K b{};
  b.d = half(0.5f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
  // Low nibble 1, high nibble 2; high bit pairs 0, 1, 2, 3: the four groups of 32 of each half
  // hold 1, 1 + 16, 2 + 32, 2 + 48, i.e. -31, -15, 2, 18 after the offset of 32.
  std::memset(b.ql, 0x21, sizeof(b.ql));
  std::memset(b.qh, 0b11100100, sizeof(b.qh));
  float y[256];
  dequantize_row(DType::Q6_K, &b, y, 256);
  const int q[4] = {-31, -15, 2, 18};
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(y[i], 0.5f * static_cast<float>(i / 16 - 8) * static_cast<float>(q[i % 128 / 32]))
        << i;
  }
}

// The 12 scale bytes of Q4_K / Q5_K below hold scales {1, 2, 3, 4, 17, 35, 53, 7} and minimums
// {5, 6, 7, 8, 2, 20, 38, 56}: 4..7 take their high 2 bits from the top bits of bytes 0..7.
constexpr uint8_t kScalesK4[12] = {0x41, 0x82, 0xC3, 0x04, 0x05, 0x46,
                                   0x87, 0xC8, 0x21, 0x43, 0x65, 0x87};
constexpr int kK4Scale[8] = {1, 2, 3, 4, 17, 35, 53, 7};
constexpr int kK4Min[8] = {5, 6, 7, 8, 2, 20, 38, 56};

TEST(KQuantDequantize, ScalesMinsK4PackAndUnpack) {
  uint8_t sc[8], mn[8];
  unpack_scales_mins_k4(kScalesK4, sc, mn);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(sc[j], kK4Scale[j]) << j;
    EXPECT_EQ(mn[j], kK4Min[j]) << j;
  }
  for (int v = 0; v < 64; ++v) {
    uint8_t s[8], m[8], packed[12], s2[8], m2[8];
    for (int j = 0; j < 8; ++j) {
      s[j] = static_cast<uint8_t>((v + 7 * j) % 64);
      m[j] = static_cast<uint8_t>((v + 13 * j + 5) % 64);
    }
    pack_scales_mins_k4(s, m, packed);
    unpack_scales_mins_k4(packed, s2, m2);
    for (int j = 0; j < 8; ++j) {
      ASSERT_EQ(s2[j], s[j]);
      ASSERT_EQ(m2[j], m[j]);
    }
  }
}

TEST(KQuantDequantize, Q4_KHandBuiltBlock) {
  BlockQ4_K b{};
  b.d = half(0.5f);
  b.dmin = half(0.25f);
  std::memcpy(b.scales, kScalesK4, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  float y[256];
  dequantize_row(DType::Q4_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32, l = i % 32;
    const int q = sub % 2 == 0 ? l % 16 : 15 - l % 16;
    ASSERT_EQ(y[i], 0.5f * static_cast<float>(kK4Scale[sub] * q) - 0.25f * kK4Min[sub]) << i;
  }
}

TEST(KQuantDequantize, Q5_KHandBuiltBlock) {
  BlockQ5_K b{};
  b.d = half(0.5f);
  b.dmin = half(0.25f);
  std::memcpy(b.scales, kScalesK4, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  // Fifth bits: byte l of qh has bit 2j (element 64 j + l) for even l, bit 2j + 1 for odd l.
  for (int l = 0; l < 32; ++l) b.qh[l] = l % 2 == 0 ? 0x55 : 0xAA;
  float y[256];
  dequantize_row(DType::Q5_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 32, l = i % 32;
    const int q = sub % 2 == 0 ? l % 16 + 16 * (l % 2 == 0) : 15 - l % 16 + 16 * (l % 2 == 1);
    ASSERT_EQ(y[i], 0.5f * static_cast<float>(kK4Scale[sub] * q) - 0.25f * kK4Min[sub]) << i;
  }
}

TEST(KQuantDequantize, Q3_KHandBuiltBlock) {
  BlockQ3_K b{};
  b.d = half(0.5f);
  // Low 4 bits of scale j: nibble j / 8 of byte j % 8 (here 0, 2, .., 14, then 1, 3, .., 15);
  // high 2 bits: pair j / 4 of byte 8 + j % 4 (here j % 4). Each scale is stored plus 32.
  const uint8_t packed[12] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA,
                              0xDC, 0xFE, 0x00, 0x55, 0xAA, 0xFF};
  std::memcpy(b.scales, packed, 12);
  const int scale[16] = {-32, -14, 4, 22, -24, -6, 12, 30, -31, -13, 5, 23, -23, -5, 13, 31};
  // Low bits: bit pair j of every byte is j; high bit k of hmask[l]: l < 16 for the first 128
  // elements, l >= 16 for the others.
  std::memset(b.qs, 0xE4, sizeof(b.qs));
  for (int l = 0; l < 32; ++l) b.hmask[l] = l < 16 ? 0x0F : 0xF0;
  float y[256];
  dequantize_row(DType::Q3_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int n = i / 128, j = i % 128 / 32, l = i % 32;
    const int high = n == 0 ? l < 16 : l >= 16;
    ASSERT_EQ(y[i], 0.5f * static_cast<float>(scale[i / 16] * (j + 4 * high - 4))) << i;
  }
}

TEST(KQuantDequantize, Q2_KHandBuiltBlock) {
  BlockQ2_K b{};
  b.d = half(0.5f);
  b.dmin = half(0.25f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  std::memset(b.qs, 0xE4, sizeof(b.qs));  // bit pair j is j: element 128 n + 32 j + l is j
  float y[256];
  dequantize_row(DType::Q2_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) {
    const int sub = i / 16, q = i % 128 / 32;
    ASSERT_EQ(y[i], 0.5f * static_cast<float>(sub * q) - 0.25f * static_cast<float>(15 - sub)) << i;
  }
}

// Every 2-D tensor of llama.cpp's quantized random-llama-kq files, dequantised, against the
// F32 original it was made from: the error is that of the type's bit width, where a misread
// field (a scale, a bit plane, a sign) would give errors of the size of the values themselves.
TEST(KQuantFiles, DequantisedTensorsMatchTheF32Originals) {
  using testing::shared_path;
  K25_REQUIRE_SHARED();
  const auto f32 = GgufFile::open(shared_path("models/random-llama-kq-f32.gguf"));
  // llama.cpp's encoders give 0.293-0.300, 0.149-0.152, 0.0707-0.0716, 0.0359-0.0363 and
  // 0.0176-0.0179 on these tensors.
  const std::map<DType, double> max_error = {{DType::Q2_K, 0.33},
                                             {DType::Q3_K, 0.17},
                                             {DType::Q4_K, 0.08},
                                             {DType::Q5_K, 0.04},
                                             {DType::Q6_K, 0.02}};
  std::map<DType, double> worst;
  for (const char* file : {"q2_k", "q3_k_m", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k"}) {
    const auto q =
        GgufFile::open(shared_path(std::string("models/random-llama-kq-") + file + ".gguf"));
    for (const TensorView& t : q->tensors()) {
      if (max_error.count(t.type) == 0) continue;
      const TensorView* ref = f32->tensor(t.name);
      ASSERT_NE(ref, nullptr) << t.name;
      const int64_t cols = t.row_length(), rows = t.n_rows();
      std::vector<float> row(cols);
      double err = 0.0, energy = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + r * row_bytes(t.type, cols),
                       row.data(), cols);
        const float* orig = static_cast<const float*>(ref->data) + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
          err += (row[c] - orig[c]) * (row[c] - orig[c]);
          energy += orig[c] * orig[c];
        }
      }
      const double rel = std::sqrt(err / energy);
      worst[t.type] = std::max(worst[t.type], rel);
    }
  }
  for (const auto& [type, bound] : max_error) {
    EXPECT_LT(worst[type], bound) << dtype_name(type);
  }
}

}  // namespace
}  // namespace k25
