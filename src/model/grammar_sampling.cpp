#include "model/grammar_sampling.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

TokenId sample_constrained(Sampler& sampler, GrammarMatcher& matcher, float* logits, int n_logits,
                           const std::vector<TokenId>& history, int64_t tokens_left) {
  std::vector<float>& raw = matcher.scratch_logits();
  raw.assign(logits, logits + n_logits);  // the sampler rewrites logits in place
  // Samples again from the raw logits, among the tokens in `allowed` only.
  const auto sample_from = [&](const std::vector<uint64_t>& allowed) {
    const int n_vocab = std::min(n_logits, matcher.n_vocab());
    bool any = false;
    for (int begin = 0; begin < n_vocab && !any; begin += 64) {
      const int bits = std::min(64, n_vocab - begin);
      const uint64_t word = allowed[static_cast<size_t>(begin) >> 6];
      any = (bits == 64 ? word : word & ((uint64_t{1} << bits) - 1)) != 0;
    }
    if (!any) fail("grammar: no token of the vocabulary can continue the output here");
    std::copy(raw.begin(), raw.end(), logits);
    return sampler.sample(logits, history, allowed);
  };
  TokenId token = sampler.sample(logits, history);
  if (!matcher.allows(token)) token = sample_from(matcher.allowed_tokens());
  if (!matcher.ends_within(token, tokens_left))
    token = sample_from(matcher.allowed_tokens_within(tokens_left));
  matcher.accept(token);
  return token;
}

}  // namespace k25
