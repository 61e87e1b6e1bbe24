// Checks shared by the tests of the block-type kernels (kernels/block_types.h): random rows, the
// activations dequantised from their block formats, and a double-precision dot to compare with.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/block_types.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "test_paths.h"

namespace k25::testing {

// Normal values whose spread changes from block to block, so block scales differ in a row.
inline std::vector<float> random_row(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = g(rng) * (1.0f + static_cast<float>((i / 32) % 4));
  return x;
}

inline std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

inline std::vector<float> dequantize(DType type, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> x(n);
  dequantize_row(type, q.data(), x.data(), n);
  return x;
}

inline std::vector<uint8_t> quantize_activations(ActFormat format, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> a(act_row_bytes(format, n));
  quantize_acts(format, x.data(), a.data(), n);
  return a;
}

// The values the activation blocks stand for: d * q.
inline std::vector<double> activation_values(ActFormat format, const std::vector<uint8_t>& a,
                                             int64_t n) {
  std::vector<double> x(n);
  if (format == ActFormat::kQ8_K) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(a.data());
    for (int64_t i = 0; i < n; ++i)
      x[i] = static_cast<double>(b[i / 256].d) * b[i / 256].qs[i % 256];
    return x;
  }
  const size_t block_bytes = format == ActFormat::kQ8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  const size_t qs_offset = format == ActFormat::kQ8_1 ? 4 : 2;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* block = a.data() + (i / 32) * block_bytes;
    uint16_t d;
    std::memcpy(&d, block, 2);
    x[i] = static_cast<double>(f16_to_f32(d)) * static_cast<int8_t>(block[qs_offset + i % 32]);
  }
  return x;
}

// For weights with a minimum against Q8_1 activations: sum over blocks of |m_w s_a| (m_w is the
// f16 at byte 2 of each weight block, s_a = d sum(q) rounded to f16).
inline double q8_1_min_terms(const std::vector<uint8_t>& w, size_t w_block_bytes,
                             const std::vector<uint8_t>& a, int64_t n) {
  double sum = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint16_t m, s;
    std::memcpy(&m, w.data() + b * w_block_bytes + 2, 2);
    std::memcpy(&s, a.data() + b * sizeof(BlockQ8_1) + 2, 2);
    sum += std::fabs(static_cast<double>(f16_to_f32(m)) * f16_to_f32(s));
  }
  return sum;
}

// vec_dot of random rows against the double dot of the values both rows stand for. Allowed:
// float rounding of the per-block terms and their sum (one rounding per block in its lane plus
// the lane sum), and for Q8_1 the f16 rounding of s (2^-11 relative) in m_w s.
inline void expect_vec_dot_matches_double(DType type, int64_t n, std::mt19937& rng) {
  const BlockTypeKernels* k = block_type_kernels(type);
  ASSERT_NE(k, nullptr);
  const std::vector<float> wx = random_row(n, rng), xx = random_row(n, rng);
  const std::vector<uint8_t> w = quantize(type, wx);
  const std::vector<float> wv = dequantize(type, w, n);
  const std::vector<uint8_t> a = quantize_activations(k->act, xx);
  const std::vector<double> av = activation_values(k->act, a, n);
  double exact = 0.0, magnitude = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    exact += wv[i] * av[i];
    magnitude += std::fabs(wv[i] * av[i]);
  }
  const double min_terms =
      k->act == ActFormat::kQ8_1 ? q8_1_min_terms(w, dtype_block_bytes(type), a, n) : 0.0;
  const double roundings = static_cast<double>(n / 32 / 8 + 8);
  const double tolerance = roundings * std::ldexp(1.0, -24) * (magnitude + 2 * min_terms) +
                           min_terms * std::ldexp(1.0, -11);
  EXPECT_NEAR(k->vec_dot(w.data(), a.data(), n), exact, tolerance)
      << dtype_name(type) << " n=" << n;
}

// The kernel block_type_kernels() uses (AVX2 where built) gives bitwise the portable result.
inline void expect_simd_equals_portable(DType type, const BlockTypeKernels& portable, int64_t n,
                                        std::mt19937& rng) {
  const BlockTypeKernels* k = block_type_kernels(type);
  ASSERT_NE(k, nullptr);
  const std::vector<uint8_t> w = quantize(type, random_row(n, rng));
  const std::vector<uint8_t> a = quantize_activations(k->act, random_row(n, rng));
  const float simd = k->vec_dot(w.data(), a.data(), n);
  const float scalar = portable.vec_dot(w.data(), a.data(), n);
  uint32_t simd_bits, scalar_bits;
  std::memcpy(&simd_bits, &simd, 4);
  std::memcpy(&scalar_bits, &scalar, 4);
  EXPECT_EQ(simd_bits, scalar_bits)
      << dtype_name(type) << " n=" << n << ": " << simd << " vs " << scalar;
}

// Encodes every tensor of `type` in the llama-quantize output models/random-llama-kq-<file>.gguf
// from the same tensor of random-llama-kq-f32.gguf and counts the blocks whose bytes differ.
// Sets *tensors to the number of tensors compared.
inline int64_t blocks_differing_from_llama_quantize(DType type, const std::string& file,
                                                    int* tensors) {
  const auto f32 = GgufFile::open(shared_path("models/random-llama-kq-f32.gguf"));
  const auto quantized = GgufFile::open(shared_path("models/random-llama-kq-" + file + ".gguf"));
  const size_t block_bytes = dtype_block_bytes(type);
  int64_t differing = 0;
  *tensors = 0;
  for (const TensorView& q : quantized->tensors()) {
    if (q.type != type) continue;
    const TensorView* src = f32->tensor(q.name);
    if (src == nullptr || src->type != DType::F32) ADD_FAILURE() << q.name << " has no F32 source";
    if (src == nullptr || src->type != DType::F32) continue;
    const int64_t n = q.row_length() * q.n_rows();
    std::vector<uint8_t> mine(row_bytes(type, n));
    quantize_row(type, static_cast<const float*>(src->data), mine.data(), n);
    const auto* theirs = static_cast<const uint8_t*>(q.data);
    for (size_t b = 0; b < mine.size() / block_bytes; ++b) {
      differing +=
          std::memcmp(mine.data() + b * block_bytes, theirs + b * block_bytes, block_bytes) != 0;
    }
    ++*tensors;
  }
  return differing;
}

// matmul over a rows x cols weight of `type` gives, for every token in a batch of n_tokens, bitwise
// the vec_dot of each row with that token's quantised activations (whatever the batch and the
// number of threads).
inline void expect_matmul_is_vec_dot(DType type, int64_t rows, int64_t cols, int n_tokens,
                                     ThreadPool& pool, std::mt19937& rng) {
  const BlockTypeKernels* k = block_type_kernels(type);
  ASSERT_NE(k, nullptr);
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> w(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = quantize(type, random_row(cols, rng));
    std::copy(row.begin(), row.end(), w.begin() + r * rb);
  }
  TensorView view;
  view.name = "test.weight";
  view.type = type;
  view.n_dims = 2;
  view.ne = {cols, rows, 1, 1};
  view.data = w.data();
  view.bytes = w.size();
  std::vector<float> x;
  for (int t = 0; t < n_tokens; ++t) {
    const std::vector<float> xt = random_row(cols, rng);
    x.insert(x.end(), xt.begin(), xt.end());
  }
  std::vector<float> y(static_cast<size_t>(n_tokens * rows), NAN);
  matmul(view, x.data(), n_tokens, y.data(), pool);
  for (int t = 0; t < n_tokens; ++t) {
    const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
    const std::vector<uint8_t> a = quantize_activations(k->act, xt);
    for (int64_t r = 0; r < rows; ++r) {
      const float expected = k->vec_dot(w.data() + r * rb, a.data(), cols);
      ASSERT_EQ(std::memcmp(&y[t * rows + r], &expected, 4), 0)
          << dtype_name(type) << " rows " << rows << " cols " << cols << " tokens " << n_tokens
          << " threads " << pool.size() << ": token " << t << " row " << r << ": "
          << y[t * rows + r] << " vs " << expected;
    }
  }
}

// expect_matmul_is_vec_dot for each type and column count with 1, 5 and 19 tokens: 37 rows on one
// thread and 301 rows on three.
inline void expect_matmul_is_vec_dot_for(std::initializer_list<DType> types,
                                         std::initializer_list<int64_t> cols_list) {
  std::mt19937 rng(31);
  ThreadPool one(1), three(3);
  for (DType t : types) {
    for (int64_t cols : cols_list) {
      for (int n_tokens : {1, 5, 19}) {
        expect_matmul_is_vec_dot(t, 37, cols, n_tokens, one, rng);
        expect_matmul_is_vec_dot(t, 301, cols, n_tokens, three, rng);
      }
    }
  }
}

// The encoder of `type` writes every block of random-llama-kq-<file>.gguf as llama-quantize did.
inline void expect_encoder_reproduces_llama_quantize(DType type, const std::string& file) {
  int tensors = 0;
  const int64_t n_blocks = blocks_differing_from_llama_quantize(type, file, &tensors);
  EXPECT_GT(tensors, 0) << dtype_name(type);
  EXPECT_EQ(n_blocks, 0) << dtype_name(type);
}

}  // namespace k25::testing
