// Single-sequence generation: one batched prefill of the prompt, then one token per step.
// Used by k25-run and by tests; the server's engine runs many sequences instead.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/grammar.h"
#include "model/model.h"
#include "model/sampler.h"

namespace k25 {

struct GenerateOptions {
  int n_predict = 128;
  SamplingParams sampling;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  std::vector<std::string> stop;
  int prefill_chunk = 512;           // prompt tokens per forward call
  KvDtype kv_dtype = KvDtype::kF32;  // element type of the KV cache's rows
  // Constrained decoding (grammar_matcher.h): the output stays in the grammar and ends ("stop")
  // when it is complete. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
};

struct GenerateResult {
  std::vector<TokenId> tokens;  // generated tokens only
  std::string text;             // their text, stop strings cut off
  std::string finish_reason;    // "length", "stop" (EOS or stop string)
  int prefill_tokens = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // tokens after the first / decode time
};

// on_text receives text as it becomes final (complete UTF-8, never part of a stop string).
GenerateResult generate(Model& model, ThreadPool& pool, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options,
                        const std::function<void(const std::string&)>& on_text = {});

}  // namespace k25
