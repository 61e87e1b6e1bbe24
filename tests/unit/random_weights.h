// Random quantised weight matrices for the kernel tests, with their dequantised values, and the
// double-precision reference check of matmul over them.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/tensor.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace k25::testing {

struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantised;  // rows x cols
  TensorView view;                 // over bytes
};

// Every fifth row has four times the spread, so block scales differ within a matrix.
inline Weights make_weights(DType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  Weights w;
  const size_t rb = row_bytes(type, cols);
  w.bytes.resize(rb * rows);
  w.dequantised.resize(rows * cols);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = g(rng) * (r % 5 == 0 ? 4.0f : 1.0f);
    quantize_row(type, row.data(), w.bytes.data() + r * rb, cols);
    dequantize_row(type, w.bytes.data() + r * rb, w.dequantised.data() + r * cols, cols);
  }
  w.view.name = "test.weight";
  w.view.type = type;
  w.view.n_dims = 2;
  w.view.ne = {cols, rows, 1, 1};
  w.view.data = w.bytes.data();
  w.view.bytes = w.bytes.size();
  return w;
}

// Checks matmul(w, x) against sum_c W[r][c] * x'[t][c] in double, where x' is x itself for
// float weights and x after a Q8_0 round trip for quantised ones.
inline void check_matmul(const Weights& w, const std::vector<float>& x, int n_tokens,
                         ThreadPool& pool) {
  const int64_t cols = w.view.row_length();
  const int64_t rows = w.view.n_rows();
  const bool quantised = w.view.type == DType::Q8_0 || w.view.type == DType::Q4_0;
  std::vector<float> xr(x);
  if (quantised) {
    std::vector<uint8_t> q(row_bytes(DType::Q8_0, cols));
    for (int t = 0; t < n_tokens; ++t) {
      quantize_row(DType::Q8_0, x.data() + t * cols, q.data(), cols);
      dequantize_row(DType::Q8_0, q.data(), xr.data() + t * cols, cols);
    }
  }
  std::vector<float> y(n_tokens * rows, NAN);
  matmul(w.view, x.data(), n_tokens, y.data(), pool);
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0.0;
      double mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = double{w.dequantised[r * cols + c]} * xr[t * cols + c];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(y[t * rows + r], ref, 1e-5 * mag + 1e-30)
          << "type " << static_cast<int>(w.view.type) << " rows " << rows << " cols " << cols
          << " tokens " << n_tokens << " threads " << pool.size() << " at token " << t << " row "
          << r;
    }
  }
}

// Each of x's tokens multiplied alone (one token per call).
inline std::vector<float> lone_products(const TensorView& w, const std::vector<float>& x,
                                        int n_tokens, ThreadPool& pool) {
  const int64_t rows = w.n_rows(), cols = w.row_length();
  std::vector<float> alone(n_tokens * rows);
  for (int t = 0; t < n_tokens; ++t) {
    matmul(w, x.data() + t * cols, 1, alone.data() + t * rows, pool);
  }
  return alone;
}

// Batch invariance: tokens [t0, t0 + n) of x in one call give bitwise the lone products.
inline void expect_batch_matches_lone(const TensorView& w, const std::vector<float>& x,
                                      const std::vector<float>& alone, int t0, int n,
                                      ThreadPool& pool) {
  const int64_t rows = w.n_rows(), cols = w.row_length();
  std::vector<float> y(n * rows);
  matmul(w, x.data() + t0 * cols, n, y.data(), pool);
  for (int t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(y[t * rows + r], alone[(t0 + t) * rows + r])
          << dtype_name(w.type) << " cols " << cols << " batch of " << n << " from token " << t0
          << ": token " << t << " row " << r;
    }
  }
}

}  // namespace k25::testing
