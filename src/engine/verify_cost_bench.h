// Issue 16: what verifying a draft costs. Speculative decoding replaces k + 1 decode steps of one
// sequence by one forward call of k + 1 positions (the last token and k drafted ones, each with
// its logits row) when the draft is accepted; it pays where that call costs much less than k + 1
// decode steps, which is where a decode step is memory-bound. Measured here, at a given depth
// of context, on the engine's paged KV cache: the call of k + 1 positions against the call of one
// (k = 0), median of `reps` calls each (the same positions are rewritten each time, as a
// rejected draft's rows are).
#pragma once

#include <vector>

#include "kernels/kv_dtype.h"
#include "model/model.h"

namespace k25 {

struct VerifyCost {
  int k = 0;             // drafted tokens verified with the last one (0: a plain decode step)
  double seconds = 0;    // median of the calls
  double vs_decode = 0;  // seconds / the k = 0 call's
};

// Throws k25::Error when depth + max_k + 1 positions do not fit the model's context.
std::vector<VerifyCost> measure_verify_cost(Model& model, int depth, int max_k, int reps,
                                            ThreadPool& pool, KvDtype kv_dtype);

// Tokens a verify step yields on average when each drafted token is accepted with probability
// `acceptance` independently of the others (the first rejection ends the draft; the model's own
// token always comes): 1 + a + a^2 + ... + a^k.
double expected_tokens_per_verify(double acceptance, int k);

}  // namespace k25
