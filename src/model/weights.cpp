#include "model/weights.h"

#include "kernels/quant.h"
#include "util/error.h"

namespace k25 {

const TensorView& expect_matrix(const TensorView* t, const std::string& name, int64_t cols,
                                int64_t rows) {
  if (t == nullptr) fail("model is missing tensor '", name, "'");
  if (t->ne[0] != cols || t->n_rows() != rows) {
    fail("tensor '", name, "' has shape [", t->ne[0], ", ", t->n_rows(), "], expected [", cols,
         ", ", rows, "]");
  }
  return *t;
}

std::vector<float> load_vector(const TensorView* t, const std::string& name, int64_t n) {
  if (t == nullptr) fail("model is missing tensor '", name, "'");
  if (t->n_elements() != n) {
    fail("tensor '", name, "' has ", t->n_elements(), " elements, expected ", n);
  }
  if (t->type != DType::F32 && t->type != DType::F16 && t->type != DType::BF16) {
    fail("tensor '", name, "' has type ", dtype_name(t->type), "; norms and biases must be float");
  }
  std::vector<float> out(n);
  dequantize_row(t->type, t->data, out.data(), n);
  return out;
}

}  // namespace k25
