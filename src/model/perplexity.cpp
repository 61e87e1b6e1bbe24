#include "model/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace k25 {

double token_nll(const float* logits, int n_vocab, TokenId token) {
  const float max_logit = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int v = 0; v < n_vocab; ++v) sum += std::exp(logits[v] - max_logit);
  return -(static_cast<double>(logits[token]) - max_logit - std::log(sum));
}

PerplexityResult compute_perplexity(Model& model, const std::vector<TokenId>& tokens, int n_ctx,
                                    ThreadPool& pool,
                                    const std::function<void(int, double)>& on_chunk,
                                    KvDtype kv_dtype) {
  if (n_ctx < 4 || n_ctx % 2 != 0) fail("perplexity: context size must be even and >= 4");
  if (n_ctx > model.config().context_length) {
    fail("perplexity: context ", n_ctx, " exceeds the model's ", model.config().context_length);
  }
  if (tokens.size() < 2 * static_cast<size_t>(n_ctx)) {
    fail("perplexity: need at least ", 2 * n_ctx, " tokens for context ", n_ctx, ", have ",
         tokens.size());
  }
  const int n_vocab = model.config().n_vocab;
  const int n_chunks = static_cast<int>(tokens.size() / n_ctx);
  const int first = n_ctx / 2;
  const TokenId bos = model.tokenizer().bos();
  auto kv = model.make_kv_cache(kv_dtype);
  std::vector<float> logits(static_cast<size_t>(n_ctx - 1 - first) * n_vocab);
  std::vector<BatchToken> batch(n_ctx);

  PerplexityResult result;
  result.n_chunks = n_chunks;
  double nll_sum = 0, nll2_sum = 0;
  for (int k = 0; k < n_chunks; ++k) {
    const size_t start = static_cast<size_t>(k) * n_ctx;
    for (int j = 0; j < n_ctx; ++j) {
      batch[j] = {tokens[start + j], j, 0, j >= first && j < n_ctx - 1};
    }
    if (bos >= 0 && model.tokenizer().vocab().add_bos) batch[0].token = bos;
    kv->clear(0);
    model.forward(batch, *kv, logits.data(), pool);
    for (int j = first; j < n_ctx - 1; ++j) {
      const double nll = token_nll(logits.data() + static_cast<size_t>(j - first) * n_vocab,
                                   n_vocab, tokens[start + j + 1]);
      nll_sum += nll;
      nll2_sum += nll * nll;
      ++result.n_scored;
    }
    const double mean = nll_sum / result.n_scored;
    result.running_ppl.push_back(std::exp(mean));
    if (on_chunk) on_chunk(k, result.running_ppl.back());
  }
  const double mean = nll_sum / result.n_scored;
  const double variance = nll2_sum / result.n_scored - mean * mean;
  result.ppl = std::exp(mean);
  result.error = result.n_scored > 1 ? result.ppl * std::sqrt(variance / (result.n_scored - 1)) : 0;
  return result;
}

}  // namespace k25
