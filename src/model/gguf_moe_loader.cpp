#include "model/gguf_moe_loader.h"

#include "core/error.h"
#include "model/weights.h"

namespace k25 {

void read_gguf_moe_config(const GgufFile& f, const std::string& arch, ModelConfig& c) {
  const std::string p = arch + ".";
  const int64_t n_experts = f.get_int(p + "expert_count");
  const int64_t n_used = f.get_int(p + "expert_used_count");
  const int64_t expert_ffn = f.get_int(p + "expert_feed_forward_length");
  if (n_experts < 1 || n_experts > 4096 || n_used < 1 || n_used > n_experts || expert_ffn < 1 ||
      expert_ffn > (1 << 22)) {
    fail(f.path(), ": inconsistent mixture of experts (", p, "expert_count ", n_experts,
         ", expert_used_count ", n_used, ", expert_feed_forward_length ", expert_ffn, ")");
  }
  c.n_experts = static_cast<int>(n_experts);
  c.n_experts_used = static_cast<int>(n_used);
  c.expert_ffn_dim = static_cast<int>(expert_ffn);
}

MoeWeights load_gguf_moe_layer(const GgufFile& f, const std::string& prefix,
                               const std::string& arch, const ModelConfig& c) {
  const auto count_mismatch = [&](const std::string& name, const char* what, int64_t n) {
    fail(f.path(), ": tensor '", name, "' has ", n, " experts (", what, ") but ", arch,
         ".expert_count is ", c.n_experts);
  };
  MoeWeights w;
  const std::string router = prefix + "ffn_gate_inp.weight";
  const TensorView* r = f.tensor(router);
  if (r != nullptr && r->ne[0] == c.dim && r->n_rows() != c.n_experts) {
    count_mismatch(router, "rows", r->n_rows());
  }
  w.router = expect_matrix(r, router, c.dim, c.n_experts);
  const auto experts = [&](const char* suffix, int64_t cols, int64_t rows) {
    const std::string name = prefix + suffix;
    const TensorView* t = f.tensor(name);
    if (t == nullptr) fail("model is missing tensor '", name, "'");
    if (t->ne[2] != c.n_experts) count_mismatch(name, "ne2", t->ne[2]);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[3] != 1) {
      fail("tensor '", name, "' has shape [", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], ", ",
           t->ne[3], "], expected [", cols, ", ", rows, ", ", c.n_experts, "]");
    }
    std::vector<TensorView> views;
    for (int e = 0; e < c.n_experts; ++e) views.push_back(expert_matrix(*t, e));
    return views;
  };
  w.gate = experts("ffn_gate_exps.weight", c.dim, c.expert_ffn_dim);
  w.up = experts("ffn_up_exps.weight", c.dim, c.expert_ffn_dim);
  w.down = experts("ffn_down_exps.weight", c.expert_ffn_dim, c.dim);
  return w;
}

}  // namespace k25
