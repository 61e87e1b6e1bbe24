#include "model/weights.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/mapped_file.h"
#include "kernels/quant.h"

namespace k25 {

void repack_matmul_weights(LoadedModel& m, bool release_mapped_source) {
  ModelWeights& w = m.weights;
  std::vector<TensorView*> views;
  const auto add = [&](TensorView& t) {
    if (repack_supported(t.type)) views.push_back(&t);
  };
  for (LayerWeights& L : w.layers) {
    for (TensorView* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) add(*t);
    for (auto* experts : {&L.moe.gate, &L.moe.up, &L.moe.down}) {
      for (TensorView& t : *experts) add(t);
    }
  }
  add(w.output);
  if (views.empty()) return;
  const int n_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  // Released chunk by chunk as the repack goes, so the peak resident size stays near the
  // final one. The token embedding stays (a tied output matrix shares its bytes).
  const void* embedding = w.token_embedding.data;
  const auto release = [&](size_t tensor, const void* begin, size_t bytes) {
    if (views[tensor]->data != embedding) release_mapped_pages(begin, bytes);
  };
  m.packed =
      repack_matrices(views, n_threads, release_mapped_source ? RepackedRangeFn(release) : nullptr);
}

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
