// Mixture-of-experts feed-forward block (Qwen3-MoE): a router scores every expert for each token,
// the token goes to its top-k experts, each expert is a SwiGLU FFN, and the token's output is the
// sum of their outputs weighted by the renormalised router probabilities.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace k25 {

// One layer's experts. The per-expert views are 2-D slices of the file's 3-D expert tensors
// (expert_matrix), so the matmul kernels (and the load-time repack) see ordinary matrices.
struct MoeWeights {
  TensorView router;                 // n_experts rows of dim (F32 in GGUF files)
  std::vector<TensorView> gate, up;  // per expert: expert_ffn rows of dim
  std::vector<TensorView> down;      // per expert: dim rows of expert_ffn
  int n_experts() const { return static_cast<int>(gate.size()); }
  bool empty() const { return gate.empty(); }
};

// Expert e of a 3-D expert tensor ([cols, rows, n_experts] in GGUF ne order): the matrix of
// ne[1] rows starting e * ne[1] rows in.
TensorView expert_matrix(const TensorView& experts, int e);

struct ExpertChoice {
  int expert;
  float weight;
};

// For each of n_tokens tokens (router_logits: n_experts per token), the softmax over all experts,
// the k most probable (on equal probability the lower expert id first) in descending order, and
// their probabilities divided by their sum. Token t's choices are choices[t * k, t * k + k).
void route_top_k(const float* router_logits, int n_tokens, int n_experts, int k,
                 ExpertChoice* choices);

// How the experts' matmuls share the threads. kAuto picks per call (see moe_ffn.cpp); the others
// exist for the tests and the benchmark, which compare them.
enum class MoeSchedule { kAuto, kExpertPerThread, kSplitMatmuls };

// The MoE block over a batch, with its scratch buffers (reused across calls; not reentrant).
// The tokens routed to an expert are gathered into one block, so each expert's weights are read
// once per call for all of them. A token's output is the sum over its choices in rank order, so
// it does not depend on which other tokens share the batch (as far as matmul's results for a row
// do not: bit for bit with float weights).
class MoeFfn {
 public:
  // out[t] = sum over token t's k choices of weight * down_e(silu(gate_e x_t) * up_e x_t),
  // for x and out of n_tokens rows of dim.
  void forward(const MoeWeights& w, int k, const float* x, int n_tokens, float* out,
               ThreadPool& pool);
  void set_schedule(MoeSchedule schedule) { schedule_ = schedule; }

 private:
  void run_expert(const MoeWeights& w, int e, ThreadPool& pool);

  std::vector<float> logits_, rows_in_, gate_, up_, rows_out_;
  std::vector<ExpertChoice> choices_;
  std::vector<int> expert_begin_, choice_row_;
  MoeSchedule schedule_ = MoeSchedule::kAuto;
};

}  // namespace k25
