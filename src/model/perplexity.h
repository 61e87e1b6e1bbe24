// Perplexity by llama.cpp's llama-perplexity method: independent chunks of n_ctx tokens, the
// first token of each chunk replaced by BOS, only the second half of each chunk scored.
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"

namespace k25 {

struct PerplexityResult {
  double ppl = 0;
  double error = 0;  // the "+/-" llama-perplexity prints
  int n_chunks = 0;
  int n_scored = 0;
  std::vector<double> running_ppl;  // the estimate after each chunk ("[k]value")
};

// Throws k25::Error when tokens.size() < 2 * n_ctx. on_chunk(k, running) runs after each chunk.
// The KV cache stores its rows as kv_dtype.
PerplexityResult compute_perplexity(Model& model, const std::vector<TokenId>& tokens, int n_ctx,
                                    ThreadPool& pool,
                                    const std::function<void(int, double)>& on_chunk = {},
                                    KvDtype kv_dtype = KvDtype::kF32);

// -log p(token) from raw logits: float exponentials, double sum and log, as llama-perplexity.
double token_nll(const float* logits, int n_vocab, TokenId token);

}  // namespace k25
