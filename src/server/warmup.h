// R-CFG2 warm-up ("shadow requests"): the configured (domain, prompt) pairs run through the
// engine once at start, before the server reports ready, so the first real requests find the
// gates and caches warm. The generated text is discarded.
#pragma once

#include <vector>

#include "server/config.h"
#include "server/engine_client.h"

namespace k25 {

struct WarmupReport {
  int requests = 0;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double seconds = 0;
};

// Runs every prompt (greedy, up to `max_tokens` tokens each), as many at once as the engine
// takes, and waits for all of them. Throws k25::Error naming the entry for a prompt the engine
// cannot run (unknown domain, longer than the context) or one that ends with an error.
WarmupReport run_warmup(EngineClient& engine, const std::vector<WarmupPrompt>& prompts,
                        int max_tokens);

}  // namespace k25
