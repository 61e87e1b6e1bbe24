#include "engine/batched_bench.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "kv/l1_window_cache.h"
#include "kv/paged_kv_cache.h"

namespace k25 {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

BatchedBenchResult run_batched_bench(Model& model, const BatchedBenchCase& c, ThreadPool& pool,
                                     int max_batch_tokens, const ComputePlan* plan) {
  const ModelConfig& config = model.config();
  const int n_positions = c.n_prompt + c.n_generate;
  if (c.n_prompt < 1 || c.n_generate < 1 || c.n_parallel < 1 || max_batch_tokens < 1) {
    fail("batched bench: prompt, generate, parallel and batch sizes must be >= 1");
  }
  if (c.l1_window < 0) fail("batched bench: L1 window ", c.l1_window, " < 0");
  if (n_positions > config.context_length) {
    fail("batched bench: ", c.n_prompt, " + ", c.n_generate, " tokens exceed the context (",
         config.context_length, ")");
  }
  const int kv_dim = config.n_kv_heads * config.head_dim;
  const int page_tokens = PagedKvCache::kDefaultPageTokens;
  const size_t pages =
      static_cast<size_t>(c.n_parallel) * ((n_positions + page_tokens - 1) / page_tokens);
  const size_t page_bytes =
      PagePool::page_bytes_for({page_tokens, config.n_layers, kv_dim, c.kv_dtype});
  PagedKvCache paged(config.n_layers, kv_dim, config.context_length, pages * page_bytes,
                     page_tokens, c.kv_dtype);
  std::optional<L1WindowKvCache> l1;
  if (c.l1_window > 0) l1.emplace(paged, config.n_layers, kv_dim, c.l1_window);
  KvCache& kv = l1 ? static_cast<KvCache&>(*l1) : paged;

  // Any valid tokens do: the cost of a forward pass does not depend on which.
  auto token_at = [&](int seq, int pos) {
    return static_cast<TokenId>((1000 + 7919 * pos + 104729 * seq) % config.n_vocab);
  };
  std::vector<float> logits(static_cast<size_t>(c.n_parallel) * config.n_vocab);
  BatchedBenchResult result;
  result.c = c;
  if (!c.sequence_plans.empty() && static_cast<int>(c.sequence_plans.size()) != c.n_parallel) {
    fail("batched bench: ", c.sequence_plans.size(), " plans for ", c.n_parallel, " sequences");
  }
  std::vector<const ComputePlan*> row_plans;
  const auto run_batch = [&](const std::vector<BatchToken>& tokens) {
    if (c.sequence_plans.empty()) {
      model.forward(tokens, kv, logits.data(), pool, plan);
      return;
    }
    row_plans.clear();
    for (const BatchToken& t : tokens) row_plans.push_back(c.sequence_plans[t.seq]);
    if (c.call_per_plan) {
      model.Model::forward_mixed(tokens, kv, logits.data(), pool, row_plans);
    } else {
      model.forward_mixed(tokens, kv, logits.data(), pool, row_plans);
    }
  };

  std::vector<BatchToken> batch;
  const auto prefill_start = std::chrono::steady_clock::now();
  for (int seq = 0; seq < c.n_parallel; ++seq) {
    for (int pos = 0; pos < c.n_prompt; ++pos) {
      batch.push_back({token_at(seq, pos), pos, seq, pos + 1 == c.n_prompt});
      if (static_cast<int>(batch.size()) == max_batch_tokens ||
          (seq + 1 == c.n_parallel && pos + 1 == c.n_prompt)) {
        run_batch(batch);
        batch.clear();
      }
    }
  }
  result.prefill_s = seconds_since(prefill_start);

  if (l1) l1->reset_hit_counts();
  const auto decode_start = std::chrono::steady_clock::now();
  for (int step = 0; step < c.n_generate; ++step) {
    batch.clear();
    const int pos = c.n_prompt + step;
    for (int seq = 0; seq < c.n_parallel; ++seq)
      batch.push_back({token_at(seq, pos), pos, seq, true});
    run_batch(batch);
  }
  result.decode_s = seconds_since(decode_start);
  if (l1) result.l1_hit_share = l1->hit_share();
  return result;
}

}  // namespace k25
