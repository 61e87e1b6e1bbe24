#include "model/moe_ffn.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace k25 {

TensorView expert_matrix(const TensorView& experts, int e) {
  TensorView m = experts;
  m.name = experts.name + "[" + std::to_string(e) + "]";
  m.n_dims = 2;
  m.ne = {experts.ne[0], experts.ne[1], 1, 1};
  m.bytes = row_bytes(experts.type, experts.ne[0]) * static_cast<size_t>(experts.ne[1]);
  m.data = static_cast<const uint8_t*>(experts.data) + m.bytes * static_cast<size_t>(e);
  m.packed = nullptr;
  return m;
}

void route_top_k(const float* router_logits, int n_tokens, int n_experts, int k,
                 ExpertChoice* choices) {
  if (k < 1 || k > n_experts) fail("MoE routing: ", k, " experts per token out of ", n_experts);
  std::vector<float> probs(n_experts);
  for (int t = 0; t < n_tokens; ++t) {
    const float* logits = router_logits + static_cast<size_t>(t) * n_experts;
    const float max = *std::max_element(logits, logits + n_experts);
    double sum = 0.0;
    for (int e = 0; e < n_experts; ++e) {
      probs[e] = std::exp(logits[e] - max);
      sum += probs[e];
    }
    const auto inv_sum = static_cast<float>(1.0 / sum);
    for (float& p : probs) p *= inv_sum;
    ExpertChoice* c = choices + static_cast<size_t>(t) * k;
    float chosen_sum = 0.0f;
    for (int rank = 0; rank < k; ++rank) {
      // Strictly greater, scanning up from expert 0: a tie goes to the lower id. Taken experts
      // are marked -1 (probabilities are >= 0).
      int best = -1;
      for (int e = 0; e < n_experts; ++e) {
        if (probs[e] >= 0.0f && (best < 0 || probs[e] > probs[best])) best = e;
      }
      if (best < 0) best = rank;  // NaN logits: any valid expert, never a crash
      c[rank] = {best, probs[best]};
      chosen_sum += probs[best];
      probs[best] = -1.0f;
    }
    for (int rank = 0; rank < k; ++rank) c[rank].weight /= chosen_sum;
  }
}

void MoeFfn::run_expert(const MoeWeights& w, int e, ThreadPool& pool) {
  const int r0 = expert_begin_[e];
  const int n_rows = expert_begin_[e + 1] - r0;
  if (n_rows == 0) return;
  const size_t dim = w.router.row_length(), ffn = w.gate[e].n_rows();
  float* gate = gate_.data() + r0 * ffn;
  float* up = up_.data() + r0 * ffn;
  const float* in = rows_in_.data() + r0 * dim;
  const TensorView* ws[] = {&w.gate[e], &w.up[e]};
  float* ys[] = {gate, up};
  matmul_same_input(ws, ys, 2, in, n_rows, pool);
  silu_mul(gate, up, static_cast<int>(n_rows * ffn));
  matmul(w.down[e], gate, n_rows, rows_out_.data() + r0 * dim, pool);
}

void MoeFfn::forward(const MoeWeights& w, int k, const float* x, int n_tokens, float* out,
                     ThreadPool& pool) {
  if (n_tokens <= 0) return;
  if (w.empty()) fail("MoE layer has no experts");
  const int n_experts = w.n_experts();
  const size_t dim = w.router.row_length(), ffn = w.gate[0].n_rows();
  const int n_choices = n_tokens * k;
  logits_.resize(static_cast<size_t>(n_tokens) * n_experts);
  matmul(w.router, x, n_tokens, logits_.data(), pool);
  choices_.resize(n_choices);
  route_top_k(logits_.data(), n_tokens, n_experts, k, choices_.data());

  // Counting sort of the choices by expert: expert e's rows are [expert_begin_[e],
  // expert_begin_[e + 1]), in token order, and choice i's row is choice_row_[i].
  expert_begin_.assign(n_experts + 1, 0);
  for (const ExpertChoice& c : choices_) ++expert_begin_[c.expert + 1];
  std::partial_sum(expert_begin_.begin(), expert_begin_.end(), expert_begin_.begin());
  std::vector<int> next_row(expert_begin_.begin(), expert_begin_.end() - 1);
  choice_row_.resize(n_choices);
  rows_in_.resize(n_choices * dim);
  for (int i = 0; i < n_choices; ++i) {
    const int row = next_row[choices_[i].expert]++;
    choice_row_[i] = row;
    std::memcpy(rows_in_.data() + row * dim, x + (i / k) * dim, dim * sizeof(float));
  }
  gate_.resize(n_choices * ffn);
  up_.resize(n_choices * ffn);
  rows_out_.resize(n_choices * dim);

  std::vector<int> active;  // experts with rows, most rows first
  int max_rows = 0;
  for (int e = 0; e < n_experts; ++e) {
    const int n_rows = expert_begin_[e + 1] - expert_begin_[e];
    if (n_rows > 0) active.push_back(e);
    max_rows = std::max(max_rows, n_rows);
  }
  std::stable_sort(active.begin(), active.end(), [&](int a, int b) {
    return expert_begin_[a + 1] - expert_begin_[a] > expert_begin_[b + 1] - expert_begin_[b];
  });
  // With few tokens per expert, one expert per thread at a time (largest first) instead of
  // splitting every expert's small matmuls over all threads: one parallel section instead of
  // three per expert, and each thread streams whole expert matrices. bench/moe_bench.cpp, 2 Zen 3
  // threads, Qwen3-30B-A3B layer shape: decode 1.51 vs 1.80 ms, 8 tokens 12.0 vs 12.8 ms, 512
  // tokens equal. That balances only while no expert has more than a thread's share of the rows;
  // otherwise each matmul is split over the threads.
  const int n_threads = pool.size();
  const bool per_thread = schedule_ == MoeSchedule::kAuto
                              ? n_threads > 1 && int64_t{max_rows} * n_threads <= n_choices
                              : schedule_ == MoeSchedule::kExpertPerThread;
  if (per_thread) {
    std::atomic<size_t> next{0};
    pool.run([&](int) {
      thread_local ThreadPool inline_pool(1);
      for (size_t i = next++; i < active.size(); i = next++) run_expert(w, active[i], inline_pool);
    });
  } else {
    for (int e : active) run_expert(w, e, pool);
  }

  // Each token's experts summed in rank order, whatever rows they had (out may alias x: all
  // reads of x are done).
  for (int t = 0; t < n_tokens; ++t) {
    float* o = out + t * dim;
    const ExpertChoice* c = choices_.data() + static_cast<size_t>(t) * k;
    const float* first = rows_out_.data() + choice_row_[t * k] * dim;
    for (size_t i = 0; i < dim; ++i) o[i] = c[0].weight * first[i];
    for (int rank = 1; rank < k; ++rank) {
      axpy(o, c[rank].weight, rows_out_.data() + choice_row_[t * k + rank] * dim,
           static_cast<int>(dim));
    }
  }
}

}  // namespace k25
