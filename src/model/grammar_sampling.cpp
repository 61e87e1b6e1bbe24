#include "model/grammar_sampling.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace k25 {

TokenId sample_constrained(Sampler& sampler, GrammarMatcher& matcher, float* logits, int n_logits,
                           const std::vector<TokenId>& history, int64_t tokens_left) {
  std::vector<float>& raw = matcher.scratch_logits();
  raw.assign(logits, logits + n_logits);  // the sampler rewrites logits in place
  // Samples again with the tokens outside `allowed` at -inf (in `raw`, so masks accumulate).
  const auto sample_from = [&](const std::vector<uint64_t>& allowed) {
    const int n_vocab = std::min(n_logits, matcher.n_vocab());
    bool any = false;
    for (int t = 0; t < n_logits; ++t) {
      const bool ok = t < n_vocab && ((allowed[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1);
      if (!ok) raw[t] = -std::numeric_limits<float>::infinity();
      any = any || ok;
    }
    if (!any) fail("grammar: no token of the vocabulary can continue the output here");
    std::copy(raw.begin(), raw.end(), logits);
    return sampler.sample(logits, history);
  };
  TokenId token = sampler.sample(logits, history);
  if (!matcher.allows(token)) token = sample_from(matcher.allowed_tokens());
  if (!matcher.ends_within(token, tokens_left))
    token = sample_from(matcher.allowed_tokens_within(tokens_left));
  matcher.accept(token);
  return token;
}

}  // namespace k25
