// A model run for KV cache tests: several sequences prefilled together, then decoded greedily,
// with every logits row kept, so two caches can be compared bit for bit on the same inputs.
#pragma once

#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"

namespace k25::testing {

// Prefills every prompt (the sequences' tokens interleaved, in forward calls of at most `chunk`
// tokens), then decodes `steps` tokens per sequence, the next token the argmax of `reference`
// when given so that both caches see the same inputs; returns all logits in order.
inline std::vector<float> run_interleaved_greedy(Model& model, KvCache& kv,
                                                 const std::vector<std::vector<TokenId>>& prompts,
                                                 int chunk, int steps,
                                                 const std::vector<float>* reference) {
  ThreadPool pool(2);
  const int n_vocab = model.config().n_vocab;
  const int n_seq = static_cast<int>(prompts.size());
  std::vector<BatchToken> prefill;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  for (size_t i = 0; i < longest; ++i) {
    for (int s = 0; s < n_seq; ++s) {
      if (i < prompts[s].size()) prefill.push_back({prompts[s][i], static_cast<int>(i), s, true});
    }
  }
  std::vector<float> all(prefill.size() * n_vocab);
  std::vector<size_t> last_row(n_seq);
  for (size_t first = 0; first < prefill.size(); first += chunk) {
    const size_t stop = std::min(prefill.size(), first + chunk);
    const std::vector<BatchToken> batch(prefill.begin() + first, prefill.begin() + stop);
    model.forward(batch, kv, all.data() + first * n_vocab, pool);
    for (size_t r = first; r < stop; ++r) last_row[prefill[r].seq] = r;
  }
  std::vector<int> length(n_seq);
  for (int s = 0; s < n_seq; ++s) length[s] = static_cast<int>(prompts[s].size());
  for (int step = 0; step < steps; ++step) {
    const std::vector<float>& source = reference ? *reference : all;
    std::vector<BatchToken> decode;
    for (int s = 0; s < n_seq; ++s) {
      const float* row = source.data() + last_row[s] * n_vocab;
      const TokenId next = static_cast<TokenId>(std::max_element(row, row + n_vocab) - row);
      decode.push_back({next, length[s]++, s, true});
    }
    const size_t first = all.size() / n_vocab;
    all.resize(all.size() + decode.size() * n_vocab);
    model.forward(decode, kv, all.data() + first * n_vocab, pool);
    for (int s = 0; s < n_seq; ++s) last_row[s] = first + s;
  }
  return all;
}

}  // namespace k25::testing
