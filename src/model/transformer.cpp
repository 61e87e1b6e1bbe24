#include "model/transformer.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/parallel_rows.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/attention_split.h"

namespace k25 {

namespace {

void add_bias(float* rows, const std::vector<float>& bias, int n_rows) {
  if (bias.empty()) return;
  const int n = static_cast<int>(bias.size());
  for (int t = 0; t < n_rows; ++t) add_inplace(rows + static_cast<size_t>(t) * n, bias.data(), n);
}

// out row t = RMSNorm(x row t) * weight, for rows [0, n_rows).
void norm_rows(float* out, const float* x, const std::vector<float>& weight, int n_rows,
               const ModelConfig& c, ThreadPool& pool) {
  const size_t dim = c.dim;
  for_row_ranges(pool, n_rows, c.dim, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t)
      rmsnorm(out + t * dim, x + t * dim, weight.data(), c.dim, c.rms_eps);
  });
}

}  // namespace

Transformer::Transformer(LoadedModel loaded) : model_(std::move(loaded)) {
  const ModelConfig& c = model_.config;
  if (static_cast<int>(c.layers.size()) != c.n_layers) {
    fail("model '", c.name, "' describes ", c.layers.size(), " layers, expected ", c.n_layers);
  }
  for (const LayerSpec& spec : c.layers) rope_.emplace_back(spec.rope, c.rope_dim);
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
  run(batch, kv, logits, nullptr, pool, RowPlans{plan});
}

void Transformer::forward_mixed(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                                ThreadPool& pool, const std::vector<const ComputePlan*>& plans) {
  const ModelConfig& c = model_.config;
  if (plans.size() != batch.size()) {
    fail("forward_mixed: ", plans.size(), " plans for ", batch.size(), " tokens");
  }
  std::vector<const ComputePlan*> rows(plans.size());
  bool one_plan = true;
  for (size_t t = 0; t < plans.size(); ++t) {
    const ComputePlan* p = plans[t];
    if (p != nullptr && (t == 0 || p != plans[t - 1])) check_plan_shape(*p, c.n_layers, c.n_heads);
    rows[t] = p != nullptr && p->is_full() ? nullptr : p;
    one_plan = one_plan && same_plan(rows[t], rows[0]);
  }
  // One plan after all: the single-plan path, bit for bit.
  if (one_plan) {
    run(batch, kv, logits, nullptr, pool, RowPlans{rows.empty() ? nullptr : rows[0]});
  } else {
    run(batch, kv, logits, nullptr, pool, RowPlans{nullptr, &rows});
  }
}

void Transformer::forward_hidden(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                                 float* hidden, ThreadPool& pool) {
  run(batch, kv, logits, hidden, pool, RowPlans{});
}

void Transformer::run(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                      float* hidden, ThreadPool& pool, const RowPlans& plans) {
  const ModelConfig& c = model_.config;
  const ModelWeights& w = model_.weights;
  const int n = static_cast<int>(batch.size());
  if (n == 0) return;
  embed(batch, kv);

  for (int l = 0; l < c.n_layers; ++l) {
    if (plans.rows != nullptr) {
      mixed_layer(l, batch, kv, pool, *plans.rows);
      continue;
    }
    const ComputePlan* plan = plans.shared;
    const bool attention_on = plan == nullptr || (plan->attention(l) && plan->heads_on(l) > 0);
    if (attention_on) {
      attention_block(l, batch, kv, pool, plans, n);
    } else if (plan->keep_kv_of_skipped) {
      attention_block(l, batch, kv, pool, plans, 0);
    }
    if (plan == nullptr || plan->ffn(l)) ffn_block(l, n, pool);
  }

  const size_t dim = c.dim;
  if (hidden != nullptr) {
    int n_hidden = 0;
    for (int t = 0; t < n; ++t) {
      if (!batch[t].want_hidden) continue;
      rmsnorm(hidden + n_hidden * dim, x_.data() + t * dim, w.output_norm.data(), c.dim, c.rms_eps);
      ++n_hidden;
    }
  }
  int n_out = 0;
  for (int t = 0; t < n; ++t) {
    if (!batch[t].want_logits) continue;
    rmsnorm(xn_.data() + n_out * dim, x_.data() + t * dim, w.output_norm.data(), c.dim, c.rms_eps);
    ++n_out;
  }
  if (n_out == 0) return;
  matmul(w.output, xn_.data(), n_out, logits, pool);
  if (c.final_logit_softcap > 0) {
    const float cap = c.final_logit_softcap, inv_cap = 1.0f / cap;
    const size_t n_logits = static_cast<size_t>(n_out) * c.n_vocab;
    for (size_t i = 0; i < n_logits; ++i) logits[i] = std::tanh(logits[i] * inv_cap) * cap;
  }
}

void Transformer::mixed_layer(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                              ThreadPool& pool, const std::vector<const ComputePlan*>& plans) {
  std::vector<int> rows, kv_rows, ffn_rows;  // rows: attention on first, then K/V only
  for (int t = 0; t < static_cast<int>(batch.size()); ++t) {
    const ComputePlan* p = plans[t];
    if (p == nullptr || (p->attention(layer) && p->heads_on(layer) > 0)) {
      rows.push_back(t);
    } else if (p->keep_kv_of_skipped) {
      kv_rows.push_back(t);
    }
    if (p == nullptr || p->ffn(layer)) ffn_rows.push_back(t);
  }
  const int n_query = static_cast<int>(rows.size());
  rows.insert(rows.end(), kv_rows.begin(), kv_rows.end());
  if (!rows.empty()) {
    std::vector<const ComputePlan*> row_plans;
    for (int t : rows) row_plans.push_back(plans[t]);
    on_rows(rows, batch, [&](const std::vector<BatchToken>& tokens) {
      attention_block(layer, tokens, kv, pool, RowPlans{nullptr, &row_plans}, n_query);
    });
  }
  if (!ffn_rows.empty()) {
    on_rows(ffn_rows, batch, [&](const std::vector<BatchToken>& tokens) {
      ffn_block(layer, static_cast<int>(tokens.size()), pool);
    });
  }
}

template <typename Block>
void Transformer::on_rows(const std::vector<int>& rows, const std::vector<BatchToken>& batch,
                          Block block) {
  bool all = rows.size() == batch.size();
  for (size_t i = 0; all && i < rows.size(); ++i) all = rows[i] == static_cast<int>(i);
  if (all) {
    block(batch);
    return;
  }
  const size_t dim = model_.config.dim;
  std::vector<BatchToken> tokens;
  tokens.reserve(rows.size());
  gathered_.resize(rows.size() * dim);
  for (size_t i = 0; i < rows.size(); ++i) {
    tokens.push_back(batch[rows[i]]);
    std::copy_n(x_.data() + rows[i] * dim, dim, gathered_.data() + i * dim);
  }
  x_.swap(gathered_);
  block(tokens);
  x_.swap(gathered_);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(gathered_.data() + i * dim, dim, x_.data() + rows[i] * dim);
  }
}

void Transformer::embed(const std::vector<BatchToken>& batch, KvCache& kv) {
  const ModelConfig& c = model_.config;
  const TensorView& embedding = model_.weights.token_embedding;
  const int n = static_cast<int>(batch.size());
  const size_t dim = c.dim;
  x_.resize(n * dim);
  xn_.resize(n * dim);
  const size_t embd_row_bytes = row_bytes(embedding.type, c.dim);
  // The table lies in a file mapping (GGUF, safetensors) or in memory the loader wrote: decided
  // once for the whole table, rows then come from the file (MappedFile::read) or from memory.
  const MappedFile* file =
      embedding.file != nullptr && embedding.file->contains(embedding.data, embedding.bytes)
          ? embedding.file
          : nullptr;
  if (file != nullptr) embd_row_.resize(embd_row_bytes);
  for (int t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    if (bt.token < 0 || bt.token >= c.n_vocab) {
      fail("token id ", bt.token, " is outside the vocabulary (", c.n_vocab, " tokens)");
    }
    if (bt.pos < 0 || bt.pos >= c.context_length) {
      fail("position ", bt.pos, " is outside the context (", c.context_length, " tokens)");
    }
    kv.reserve(bt.seq, bt.pos + 1);
    const auto* row = static_cast<const uint8_t*>(embedding.data) + bt.token * embd_row_bytes;
    if (file != nullptr) {
      file->read(row, embd_row_bytes, embd_row_.data());
      row = embd_row_.data();
    }
    float* x = x_.data() + t * dim;
    dequantize_row(embedding.type, row, x, c.dim);
    if (c.embedding_scale != 1.0f) {
      for (size_t i = 0; i < dim; ++i) x[i] *= c.embedding_scale;
    }
  }
}

void Transformer::attention_block(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                                  ThreadPool& pool, const RowPlans& plans, int n_query) {
  const ModelConfig& c = model_.config;
  const LayerWeights& L = model_.weights.layers[layer];
  const int n = static_cast<int>(batch.size());
  const size_t q_dim = c.n_heads * c.head_dim, kv_dim = c.kv_dim();
  q_.resize(n * q_dim);
  k_.resize(n * kv_dim);
  v_.resize(n * kv_dim);
  attn_.resize(n * q_dim);

  norm_rows(xn_.data(), x_.data(), L.attn_norm, n, c, pool);
  {
    const TensorView* ws[] = {&L.wk, &L.wv, &L.wq};
    float* ys[] = {k_.data(), v_.data(), q_.data()};
    matmul_same_input(ws, ys, n_query == n ? 3 : 2, xn_.data(), n, pool);
    if (n_query > 0 && n_query < n) matmul(L.wq, xn_.data(), n_query, q_.data(), pool);
  }
  add_bias(q_.data(), L.bq, n_query);
  add_bias(k_.data(), L.bk, n);
  add_bias(v_.data(), L.bv, n);
  position_qk(layer, batch, n_query, pool);
  for (int t = 0; t < n; ++t) {
    const BatchToken& bt = batch[t];
    kv.store(bt.seq, layer, bt.pos, k_.data() + t * kv_dim, v_.data() + t * kv_dim,
             static_cast<int>(kv_dim));
  }

  if (n_query == 0) return;

  attend(layer, batch, n_query, kv, pool, plans);
  // A masked head's output is zero, so it adds nothing through wo (wo itself still runs whole).
  matmul(L.wo, attn_.data(), n_query, xn_.data(), pool);
  add_residual(L.attn_post_norm, n_query, pool);
}

void Transformer::position_qk(int layer, const std::vector<BatchToken>& batch, int n_query,
                              ThreadPool& pool) {
  const ModelConfig& c = model_.config;
  const LayerWeights& L = model_.weights.layers[layer];
  const int n = static_cast<int>(batch.size()), hd = c.head_dim;
  const size_t q_dim = c.n_heads * hd, kv_dim = c.kv_dim();
  // Per-head RMSNorm, in place (rmsnorm reads each element before writing it).
  const auto norm_heads = [&](float* heads, int n_heads, const std::vector<float>& weight) {
    if (weight.empty()) return;
    for (int h = 0; h < n_heads; ++h) {
      float* head = heads + static_cast<size_t>(h) * hd;
      rmsnorm(head, head, weight.data(), hd, c.rms_eps);
    }
  };
  for_row_ranges(pool, n, static_cast<int64_t>(q_dim + kv_dim), [&](int t0, int t1) {
    thread_local std::vector<float> cos_sin;  // per thread: the ranges run concurrently
    cos_sin.resize(c.rope_dim);
    for (int t = t0; t < t1; ++t) {
      float* q = q_.data() + t * q_dim;
      float* k = k_.data() + t * kv_dim;
      rope_[layer].cos_sin(batch[t].pos, cos_sin.data());
      if (t < n_query) {
        norm_heads(q, c.n_heads, L.q_norm);
        apply_rope(q, c.n_heads, hd, c.rope_dim, c.rope_neox, cos_sin.data());
      }
      norm_heads(k, c.n_kv_heads, L.k_norm);
      apply_rope(k, c.n_kv_heads, hd, c.rope_dim, c.rope_neox, cos_sin.data());
    }
  });
}

void Transformer::add_residual(const std::vector<float>& post_norm, int n, ThreadPool& pool) {
  const ModelConfig& c = model_.config;
  const size_t dim = c.dim;
  for_row_ranges(pool, n, c.dim, [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) {
      float* y = xn_.data() + t * dim;
      if (!post_norm.empty()) rmsnorm(y, y, post_norm.data(), c.dim, c.rms_eps);
      add_inplace(x_.data() + t * dim, y, c.dim);
    }
  });
}

// Causal attention of every (token, head) pair over its own sequence's positions 0..pos, or the
// last sliding_window of them on a sliding-window layer (older positions may still be cached, they
// are just not read). A task is one KV head with the query heads that share it, for up to
// kQueriesPerTask / group consecutive tokens of one sequence, over one chunk of positions
// (attention_split.h), so attend_queries reads each cached key and value once for all of them (a
// prefill chunk's tokens share their sequence's cache). A token whose window spans several chunks
// gets a partial output per chunk, merged at the end: at long context even one token of a model
// with one KV head keeps every thread busy. Threads take tasks from the most expensive down, so
// long and short contexts in one batch spread evenly.
void Transformer::attend(int layer, const std::vector<BatchToken>& batch, int n_query, KvCache& kv,
                         ThreadPool& pool, const RowPlans& plans) {
  const ModelConfig& c = model_.config;
  const int n = n_query;
  const int hd = c.head_dim, q_dim = c.n_heads * hd, kv_dim = c.kv_dim();
  const int group = c.n_heads / c.n_kv_heads;
  const float scale =
      c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(hd));
  const int window = c.layers[layer].sliding_window;
  const auto first_pos = [&](int t) {
    return window > 0 ? std::max(0, batch[t].pos - window + 1) : 0;
  };
  const auto first_chunk = [&](int t) { return attention_chunk_of(first_pos(t)); };
  const auto last_chunk = [&](int t) { return attention_chunk_of(batch[t].pos); };
  const KvDtype dtype = kv.dtype();
  const size_t element_bytes = kv_dtype_bytes(dtype);
  constexpr int kQueriesPerTask = 48;
  const int tokens_per_task = std::max(1, kQueriesPerTask / group);
  struct Task {
    int t0, t1, kv_head, chunk;
    int64_t cost;  // query-key products
  };
  const auto head_on = [&](int t, int h) {
    const ComputePlan* plan = plans.at(t);
    return plan == nullptr || plan->head(layer, h);
  };
  // KV heads with at least one query head on for some token; masked heads' outputs are zero.
  std::vector<int> kv_heads;
  int active_q_dim = 0;
  for (int g = 0; g < c.n_kv_heads; ++g) {
    bool any = false;
    for (int h = g * group; h < (g + 1) * group; ++h) {
      bool head_any = false;
      for (int t = 0; t < n; ++t) {
        if (head_on(t, h)) {
          head_any = true;
        } else {
          std::fill_n(attn_.data() + static_cast<size_t>(t) * q_dim + h * hd, hd, 0.0f);
        }
      }
      if (head_any) active_q_dim += hd;
      any = any || head_any;
    }
    if (any) kv_heads.push_back(g);
  }
  // Partial outputs of the tokens over several chunks: token t's part i of head h is slot
  // part_base[t] + h * n_parts + i (hd floats in parts_, 2 stats in part_stats_).
  std::vector<int> part_base(n, -1);
  int n_slots = 0;
  for (int t = 0; t < n; ++t) {
    const int n_parts = last_chunk(t) - first_chunk(t) + 1;
    if (n_parts > 1) {
      part_base[t] = n_slots;
      n_slots += c.n_heads * n_parts;
    }
  }
  parts_.resize(static_cast<size_t>(n_slots) * hd);
  part_stats_.resize(static_cast<size_t>(n_slots) * 2);

  std::vector<Task> tasks;
  int64_t work = 0;
  for (int t0 = 0; t0 < n;) {
    int t1 = t0 + 1;
    while (t1 < n && t1 - t0 < tokens_per_task && batch[t1].seq == batch[t0].seq) ++t1;
    int c0 = first_chunk(t0), c1 = last_chunk(t0);
    for (int t = t0; t < t1; ++t)
      c0 = std::min(c0, first_chunk(t)), c1 = std::max(c1, last_chunk(t));
    for (int chunk = c0; chunk <= c1; ++chunk) {
      const int lo = chunk * kAttentionChunk, hi = lo + kAttentionChunk;
      int64_t cost = 0;
      for (int t = t0; t < t1; ++t) {
        cost += std::max(0, std::min(batch[t].pos + 1, hi) - std::max(first_pos(t), lo));
      }
      if (cost == 0) continue;
      for (int g : kv_heads) tasks.push_back({t0, t1, g, chunk, cost});
      work += cost * active_q_dim;
    }
    t0 = t1;
  }
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const Task& a, const Task& b) { return a.cost > b.cost; });
  // Waking the workers costs more than tiny attention work (small models, short contexts). The
  // workers are awake during decode (they just ran the q/k/v section): from 2^16 query-key
  // products on (32 positions of a 2048-wide q) two threads did better than one (2-thread
  // decode, Zen 5, alternating, from 2^18: TinyLlama Q4_K_M 76.1 -> 78.6 tok/s, qwen3moe-small
  // 199.7 -> 203.5).
  const int n_threads = work < (int64_t{1} << 16) ? 1 : pool.size();
  scores_.resize(n_threads);
  std::atomic<size_t> next_task{0};

  const auto run = [&](int thread) {
    std::vector<AttentionQuery> queries;
    std::vector<KvSpan> spans;
    for (size_t i = next_task++; i < tasks.size(); i = next_task++) {
      const Task& task = tasks[i];
      const int seq = batch[task.t0].seq;
      const size_t head_offset = static_cast<size_t>(task.kv_head) * hd * element_bytes;
      const int lo = task.chunk * kAttentionChunk, hi = lo + kAttentionChunk;
      // The part of token t's window inside this task's chunk.
      const auto begin = [&](int t) { return std::max(first_pos(t), lo); };
      const auto end = [&](int t) { return std::min(batch[t].pos + 1, hi); };
      // Positions count from the key tile holding the first one any of the task's queries
      // attends to (the spans must start tiles; the positions before a query's window weigh
      // nothing).
      int origin = hi, n_pos = 0;
      for (int t = task.t0; t < task.t1; ++t) {
        if (begin(t) < end(t)) origin = std::min(origin, begin(t)), n_pos = std::max(n_pos, end(t));
      }
      origin -= origin % kKeyTile;
      queries.clear();
      for (int t = task.t0; t < task.t1; ++t) {
        if (begin(t) >= end(t)) continue;
        const int n_parts = last_chunk(t) - first_chunk(t) + 1;
        for (int h = task.kv_head * group; h < (task.kv_head + 1) * group; ++h) {
          if (!head_on(t, h)) continue;
          const size_t off = static_cast<size_t>(t) * q_dim + h * hd;
          AttentionQuery query{q_.data() + off, end(t) - origin, attn_.data() + off,
                               begin(t) - origin};
          if (n_parts > 1) {
            const size_t slot = part_base[t] + h * n_parts + (task.chunk - first_chunk(t));
            query.out = parts_.data() + slot * hd;
            query.stats = part_stats_.data() + slot * 2;
          }
          queries.push_back(query);
        }
      }
      spans.clear();
      for (int p = origin; p < n_pos;) {
        int run_values = 0;
        const KeyRun keys = kv.key_run(seq, layer, p);
        const std::byte* values = kv.value_rows(seq, layer, p, &run_values);
        if (keys.lane != 0) fail("attention: a KV run starts inside a key tile at position ", p);
        const int len = std::min({keys.n, run_values, n_pos - p});
        spans.push_back(
            {keys.tile + head_offset * keys.width, values + head_offset, len, keys.width});
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
  for (int t = 0; t < n; ++t) {
    if (part_base[t] < 0) continue;
    const int n_parts = last_chunk(t) - first_chunk(t) + 1;
    for (int h = 0; h < c.n_heads; ++h) {
      if (!head_on(t, h)) continue;
      const size_t slot = part_base[t] + h * n_parts;
      merge_attention_parts(parts_.data() + slot * hd, part_stats_.data() + slot * 2, n_parts, hd,
                            attn_.data() + static_cast<size_t>(t) * q_dim + h * hd);
    }
  }
}

void Transformer::ffn_block(int layer, int n, ThreadPool& pool) {
  const ModelConfig& c = model_.config;
  const LayerWeights& L = model_.weights.layers[layer];
  norm_rows(xn_.data(), x_.data(), L.ffn_norm, n, c, pool);
  if (L.moe.empty()) {
    dense_ffn(L, n, pool);
  } else {
    moe_ffn_.forward(L.moe, c.n_experts_used, xn_.data(), n, xn_.data(), pool);
  }
  add_residual(L.ffn_post_norm, n, pool);
}

void Transformer::dense_ffn(const LayerWeights& L, int n, ThreadPool& pool) {
  const ModelConfig& c = model_.config;
  const size_t ffn = c.ffn_dim;
  gate_.resize(n * ffn);
  up_.resize(n * ffn);
  {
    const TensorView* ws[] = {&L.w_gate, &L.w_up};
    float* ys[] = {gate_.data(), up_.data()};
    matmul_same_input(ws, ys, 2, xn_.data(), n, pool);
  }
  for_row_ranges(pool, n, static_cast<int64_t>(ffn), [&](int t0, int t1) {
    float* gate = gate_.data() + t0 * ffn;
    const float* up = up_.data() + t0 * ffn;
    const int count = static_cast<int>((t1 - t0) * ffn);
    if (c.ffn_activation == FfnActivation::kGeluF16) {
      gelu_f16_mul(gate, up, count);
    } else {
      silu_mul(gate, up, count);
    }
  });
  matmul(L.w_down, gate_.data(), n, xn_.data(), pool);
}

}  // namespace k25
