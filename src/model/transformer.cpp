#include "model/transformer.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "util/error.h"

namespace k25 {

namespace {

void add_bias(float* rows, const std::vector<float>& bias, int n_rows) {
  if (bias.empty()) return;
  const int n = static_cast<int>(bias.size());
  for (int t = 0; t < n_rows; ++t) add_inplace(rows + static_cast<size_t>(t) * n, bias.data(), n);
}

}  // namespace

Transformer::Transformer(LoadedModel loaded) : model_(std::move(loaded)) {
  const ModelConfig& c = model_.config;
  // theta_i = base^(-2i / rope_dim), computed as llama.cpp does (repeated float products).
  const float scale = std::pow(c.rope_theta, -2.0f / static_cast<float>(c.rope_dim));
  float theta = 1.0f;
  for (int i = 0; i < c.rope_dim / 2; ++i) {
    rope_inv_freq_.push_back(theta);
    theta *= scale;
  }
}

void Transformer::rope(float* vec, int n_heads, int pos) const {
  const ModelConfig& c = model_.config;
  const int half = c.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * rope_inv_freq_[i];
    const float cos_a = std::cos(angle), sin_a = std::sin(angle);
    for (int h = 0; h < n_heads; ++h) {
      float* head = vec + static_cast<size_t>(h) * c.head_dim;
      // Adjacent pairs (GGUF Llama layout) or the two halves (Qwen2 / Hugging Face layout).
      float* a = c.rope_neox ? head + i : head + 2 * i;
      float* b = c.rope_neox ? head + i + half : head + 2 * i + 1;
      const float x0 = *a, x1 = *b;
      *a = x0 * cos_a - x1 * sin_a;
      *b = x0 * sin_a + x1 * cos_a;
    }
  }
}

void Transformer::forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                          ThreadPool& pool) {
  forward(batch, kv, logits, pool, nullptr);
}

void Transformer::forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                          ThreadPool& pool, const ComputePlan* plan) {
  const ModelConfig& c = model_.config;
  if (plan != nullptr) {
    check_plan_shape(*plan, c.n_layers, c.n_heads);
    if (plan->is_full()) plan = nullptr;  // the unplanned path, bit for bit
  }
  const ModelWeights& w = model_.weights;
  const int n = static_cast<int>(batch.size());
  if (n == 0) return;
  const size_t dim = c.dim;
  x_.resize(n * dim);
  xn_.resize(n * dim);

  const size_t embd_row_bytes = row_bytes(w.token_embedding.type, c.dim);
  for (int t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    if (bt.token < 0 || bt.token >= c.n_vocab) {
      fail("token id ", bt.token, " is outside the vocabulary (", c.n_vocab, " tokens)");
    }
    if (bt.pos < 0 || bt.pos >= c.context_length) {
      fail("position ", bt.pos, " is outside the context (", c.context_length, " tokens)");
    }
    kv.reserve(bt.seq, bt.pos + 1);
    const auto* row =
        static_cast<const uint8_t*>(w.token_embedding.data) + bt.token * embd_row_bytes;
    dequantize_row(w.token_embedding.type, row, x_.data() + t * dim, c.dim);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    const bool attention_on = plan == nullptr || (plan->attention(l) && plan->heads_on(l) > 0);
    if (attention_on) {
      attention_block(l, batch, kv, pool, plan, false);
    } else if (plan->keep_kv_of_skipped) {
      attention_block(l, batch, kv, pool, plan, true);
    }
    if (plan == nullptr || plan->ffn(l)) ffn_block(l, n, pool);
  }

  int n_out = 0;
  for (int t = 0; t < n; ++t) {
    if (!batch[t].want_logits) continue;
    rmsnorm(xn_.data() + n_out * dim, x_.data() + t * dim, w.output_norm.data(), c.dim, c.rms_eps);
    ++n_out;
  }
  if (n_out > 0) matmul(w.output, xn_.data(), n_out, logits, pool);
}

void Transformer::attention_block(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                                  ThreadPool& pool, const ComputePlan* plan, bool kv_only) {
  const ModelConfig& c = model_.config;
  const LayerWeights& L = model_.weights.layers[layer];
  const int n = static_cast<int>(batch.size());
  const size_t dim = c.dim, q_dim = c.n_heads * c.head_dim, kv_dim = c.kv_dim();
  q_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  attn_.resize(n * q_dim);

  for (int t = 0; t < n; ++t) {
    rmsnorm(xn_.data() + t * dim, x_.data() + t * dim, L.attn_norm.data(), c.dim, c.rms_eps);
  }
  if (!kv_only) matmul(L.wq, xn_.data(), n, q_.data(), pool);
  matmul(L.wk, xn_.data(), n, k_.data(), pool);
  matmul(L.wv, xn_.data(), n, v_.data(), pool);
  if (!kv_only) add_bias(q_.data(), L.bq, n);
  add_bias(k_.data(), L.bk, n);
  add_bias(v_.data(), L.bv, n);

  for (int t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    if (!kv_only) rope(q_.data() + t * q_dim, c.n_heads, bt.pos);
    rope(k_.data() + t * kv_dim, c.n_kv_heads, bt.pos);
    kv.store(bt.seq, layer, bt.pos, k_.data() + t * kv_dim, v_.data() + t * kv_dim,
             static_cast<int>(kv_dim));
  }

  if (kv_only) return;

  attend(layer, batch, kv, pool, plan);
  // A masked head's output is zero, so it adds nothing through wo (wo itself still runs whole).
  matmul(L.wo, attn_.data(), n, xn_.data(), pool);
  for (int t = 0; t < n; ++t) add_inplace(x_.data() + t * dim, xn_.data() + t * dim, c.dim);
}

// Causal attention of every (token, head) pair over its own sequence's positions 0..pos. A task
// is one KV head with the query heads that share it, for up to kQueriesPerTask / group
// consecutive tokens of one sequence, so attend_queries reads each cached key and value once for
// all of them (a prefill chunk's tokens share their sequence's cache). Threads take tasks from
// the most expensive down, so long and short contexts in one batch spread evenly.
void Transformer::attend(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                         ThreadPool& pool, const ComputePlan* plan) {
  const ModelConfig& c = model_.config;
  const int n = static_cast<int>(batch.size());
  const int hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.kv_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const KvDtype dtype = kv.dtype();
  const size_t element_bytes = kv_dtype_bytes(dtype);
  constexpr int kQueriesPerTask = 48;
  const int tokens_per_task = std::max(1, kQueriesPerTask / group);
  struct Task {
    int t0, t1, kv_head;
    int64_t cost;  // query-key products
  };
  const auto head_on = [&](int h) { return plan == nullptr || plan->head(layer, h); };
  // KV heads with at least one query head on; masked heads' outputs are zero.
  std::vector<int> kv_heads;
  int active_q_dim = 0;
  for (int g = 0; g < c.n_kv_heads; ++g) {
    bool any = false;
    for (int h = g * group; h < (g + 1) * group; ++h) {
      if (head_on(h)) {
        any = true;
        active_q_dim += hd;
      } else {
        for (int t = 0; t < n; ++t) {
          std::fill_n(attn_.data() + static_cast<size_t>(t) * q_dim + h * hd, hd, 0.0f);
        }
      }
    }
    if (any) kv_heads.push_back(g);
  }
  std::vector<Task> tasks;
  int64_t work = 0;
  for (int t0 = 0; t0 < n;) {
    int t1 = t0 + 1;
    while (t1 < n && t1 - t0 < tokens_per_task && batch[t1].seq == batch[t0].seq) ++t1;
    int64_t cost = 0;
    for (int t = t0; t < t1; ++t) cost += batch[t].pos + 1;
    for (int g : kv_heads) tasks.push_back({t0, t1, g, cost});
    work += cost * active_q_dim;
    t0 = t1;
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const Task& a, const Task& b) { return a.cost > b.cost; });
  // Waking the workers costs more than tiny attention work (small models, short contexts).
  const int n_threads = work < (int64_t{1} << 18) ? 1 : pool.size();
  scores_.resize(n_threads);
  std::atomic<size_t> next_task{0};

  const auto run = [&](int thread) {
    std::vector<AttentionQuery> queries;
    std::vector<KvSpan> spans;
    for (size_t i = next_task++; i < tasks.size(); i = next_task++) {
      const Task& task = tasks[i];
      const int seq = batch[task.t0].seq;
      const size_t head_offset = static_cast<size_t>(task.kv_head) * hd * element_bytes;
      queries.clear();
      int n_pos = 0;
      for (int t = task.t0; t < task.t1; ++t) {
        n_pos = std::max(n_pos, batch[t].pos + 1);
        for (int h = task.kv_head * group; h < (task.kv_head + 1) * group; ++h) {
          if (!head_on(h)) continue;
          const size_t off = static_cast<size_t>(t) * q_dim + h * hd;
          queries.push_back({q_.data() + off, batch[t].pos + 1, attn_.data() + off});
        }
      }
      spans.clear();
      for (int p = 0; p < n_pos;) {
        int run_keys = 0, run_values = 0;
        const std::byte* keys = kv.key_rows(seq, layer, p, &run_keys);
        const std::byte* values = kv.value_rows(seq, layer, p, &run_values);
        const int len = std::min({run_keys, run_values, n_pos - p});
        spans.push_back({keys + head_offset, values + head_offset, len});
        p += len;
      }
      attend_queries(queries.data(), static_cast<int>(queries.size()), spans.data(),
                     static_cast<int>(spans.size()), kv_dim, hd, scale, scores_[thread], dtype);
    }
  };
  if (n_threads == 1) {
    run(0);
  } else {
    pool.run(run);
  }
}

void Transformer::ffn_block(int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = model_.config;
  const LayerWeights& L = model_.weights.layers[layer];
  const size_t dim = c.dim, ffn = c.ffn_dim;
  for (int t = 0; t < n; ++t) {
    rmsnorm(xn_.data() + t * dim, x_.data() + t * dim, L.ffn_norm.data(), c.dim, c.rms_eps);
  }
  if (!L.moe.empty()) {
    moe_ffn_.forward(L.moe, c.n_experts_used, xn_.data(), n, xn_.data(), pool);
  } else {
    gate_.resize(n * ffn);
    up_.resize(n * ffn);
    matmul(L.w_gate, xn_.data(), n, gate_.data(), pool);
    matmul(L.w_up, xn_.data(), n, up_.data(), pool);
    silu_mul(gate_.data(), up_.data(), static_cast<int>(n * ffn));
    matmul(L.w_down, gate_.data(), n, xn_.data(), pool);
  }
  for (int t = 0; t < n; ++t) add_inplace(x_.data() + t * dim, xn_.data() + t * dim, c.dim);
}

}  // namespace k25
