// Sampling under a grammar: the token the sampler picks from the allowed tokens only.
#pragma once

#include <cstdint>
#include <vector>

#include "model/grammar_matcher.h"
#include "model/sampler.h"

namespace k25 {

// Draws the next token and advances `matcher` over it. The sampler first runs on the raw logits
// and its token is kept when the grammar allows it (the usual case, and no mask is computed);
// otherwise it runs again on the logits with every token the grammar refuses at -inf. With
// temperature 0 both give the argmax of the allowed tokens. `tokens_left`: how many tokens may
// follow this one (max_tokens, the context); a token after which the output could no longer end
// in time is refused the same way, so that the output ends, whole, within the budget whenever
// the grammar's shortest completion fits (GrammarMatcher::tokens_to_end). `logits` has `n_logits`
// entries (the model's output rows, which may exceed the tokenizer's vocabulary) and is modified.
// Throws k25::Error when no token may follow.
TokenId sample_constrained(Sampler& sampler, GrammarMatcher& matcher, float* logits, int n_logits,
                           const std::vector<TokenId>& history, int64_t tokens_left);

}  // namespace k25
