// Embeddings of several inputs from one engine, waited for on the calling thread (k25-run embed,
// tests). The requests are submitted together, so they share the engine's forward calls.
#pragma once

#include <vector>

#include "engine/engine.h"

namespace k25 {

// One embedding request per input (token ids, BOS included as the caller wants), all submitted
// before any is waited for; the vectors come back in input order. Throws k25::Error naming the
// input when one is refused or fails.
std::vector<std::vector<float>> embed_all(Engine& engine,
                                          const std::vector<std::vector<TokenId>>& inputs,
                                          Pooling pooling);

}  // namespace k25
