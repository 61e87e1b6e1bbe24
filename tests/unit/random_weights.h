// Random quantised weight matrices for the kernel tests, with their dequantised values (what the
// double-precision references multiply).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "model/tensor.h"

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

}  // namespace k25::testing
