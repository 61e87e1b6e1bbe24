// One generation through the serving engine (engine.h), as k25-server runs it, for k25-run
// generate --speculative: the same options as model/generate.h plus the speculative mode, and
// the draft counts and forward calls that show what speculation did.
#pragma once

#include <cstdint>

#include "engine/speculation.h"
#include "model/generate.h"

namespace k25 {

struct EngineGenerateResult {
  GenerateResult result;  // prefill_ms: up to the first token; decode_ms: the rest
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  uint64_t decode_forward_calls = 0;  // forward calls after the prompt's (one call)
};

EngineGenerateResult generate_with_engine(Model& model, int n_threads,
                                          const std::vector<TokenId>& prompt,
                                          const GenerateOptions& options, SpeculativeMode mode,
                                          const std::function<void(const std::string&)>& on_text);

}  // namespace k25
