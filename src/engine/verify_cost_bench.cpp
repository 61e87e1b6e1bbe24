#include "engine/verify_cost_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "kv/paged_kv_cache.h"

namespace k25 {

std::vector<VerifyCost> measure_verify_cost(Model& model, int depth, int max_k, int reps,
                                            ThreadPool& pool, KvDtype kv_dtype) {
  const ModelConfig& config = model.config();
  if (depth < 1 || max_k < 0 || reps < 1) fail("verify cost: depth, k and reps must be positive");
  if (depth + max_k + 1 > config.context_length) {
    fail("verify cost: ", depth, " + ", max_k + 1, " positions exceed the context (",
         config.context_length, ")");
  }
  const int kv_dim = config.n_kv_heads * config.head_dim;
  const int page_tokens = PagedKvCache::kDefaultPageTokens;
  const size_t pages = static_cast<size_t>((depth + max_k + 1 + page_tokens - 1) / page_tokens);
  PagedKvCache kv(config.n_layers, kv_dim, config.context_length,
                  pages * PagePool::page_bytes_for({page_tokens, config.n_layers, kv_dim, kv_dtype}),
                  page_tokens, kv_dtype);
  // Any valid tokens do: the cost of a forward pass does not depend on which.
  auto token_at = [&](int pos) { return static_cast<TokenId>((1000 + 7919 * pos) % config.n_vocab); };
  std::vector<float> logits(static_cast<size_t>(max_k + 1) * config.n_vocab);
  std::vector<BatchToken> batch;
  for (int pos = 0; pos < depth; ++pos) batch.push_back({token_at(pos), pos, 0, pos + 1 == depth});
  model.forward(batch, kv, logits.data(), pool, nullptr);

  std::vector<VerifyCost> out;
  for (int k = 0; k <= max_k; ++k) {
    batch.clear();
    for (int i = 0; i <= k; ++i) batch.push_back({token_at(depth + i), depth + i, 0, true});
    std::vector<double> seconds;
    for (int r = 0; r < reps; ++r) {
      const auto start = std::chrono::steady_clock::now();
      model.forward(batch, kv, logits.data(), pool, nullptr);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(seconds.begin(), seconds.begin() + reps / 2, seconds.end());
    VerifyCost cost;
    cost.k = k;
    cost.seconds = seconds[static_cast<size_t>(reps / 2)];
    cost.vs_decode = out.empty() ? 1.0 : cost.seconds / out.front().seconds;
    out.push_back(cost);
  }
  return out;
}

double expected_tokens_per_verify(double acceptance, int k) {
  double tokens = 0, p = 1;
  for (int i = 0; i <= k; ++i, p *= acceptance) tokens += p;
  return tokens;
}

}  // namespace k25
