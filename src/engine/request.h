// What the engine is asked to do (a generation request) and what it reports back (events).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/finish_reason.h"
#include "engine/speculation.h"
#include "model/compute_plan.h"
#include "model/grammar.h"
#include "model/pooling.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

namespace k25 {

using RequestId = uint64_t;

struct GenerationRequest {
  std::vector<TokenId> prompt;  // must be non-empty
  int max_tokens = 16;          // generated tokens at most (>= 1)
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings; never sent to the client, even in part
  std::vector<TokenId>
      stop_tokens;  // end the output like end-of-generation tokens (chat turn ends)
  // < 0: no logprobs; n >= 0: the sampled token's logprob and the n most likely alternatives.
  int top_logprobs = -1;
  // End-of-generation tokens do not stop the output (benchmarks that need a fixed length).
  bool ignore_eos = false;
  int priority = 50;  // R-FP4: gold=100, silver=50, bronze=10 (read by the scheduling policy)
  // R-PR1: the compute plan chosen at admission (Levels 1-2); null = the full model.
  std::shared_ptr<const ComputePlan> plan;
  // R-PR3 Level 3: every 32 decode tokens the engine may adapt the plan (AdaptivePruner), never
  // past max_compute_saved (the request's pruning ratio, PlanDecision::max_saved).
  bool adaptive_pruning = false;
  double max_compute_saved = 0;
  // R-KV4: the conversation this request continues ("" = none). Prefix reuse works by content
  // either way; a session's cached pages are kept in preference to others.
  std::string session_id;
  // Constrained decoding: every token keeps the output a prefix of this grammar, end tokens come
  // only where it may end, and the output ends (stop) once it is complete. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // Set: an embedding request (/v1/embeddings). The prompt runs through the whole model (prefill
  // only; no compute plan, no adaptive pruning), no token is generated and the Finished event
  // carries the pooled, L2-normalised final hidden state. max_tokens and sampling are unused.
  std::optional<Pooling> embedding;
  // Set by a caller that watches the request for stalls (the fallback breaker,
  // server/first_token_watch.h): the engine adds the positions it computes for the request after
  // every forward call. Shared by the copies of a request (e.g. its n choices).
  std::shared_ptr<std::atomic<int64_t>> progress;
  // Issue 16: speculative decoding (engine/speculation.h). Only a request without a compute
  // plan or adaptive pruning drafts; its tokens are the same either way.
  SpeculativeMode speculative = SpeculativeMode::kOff;
};

struct GenerationEvent {
  enum class Kind { Token, Finished };
  Kind kind = Kind::Token;
  // Token: the sampled token; text is the part of the output that became final with it (may be
  // empty while an incomplete UTF-8 character or a possible stop string is held back).
  // Finished: text is the held-back remainder released at the end (empty after a stop string).
  TokenId token = -1;
  std::string text;
  std::optional<TokenLogprobs> logprobs;
  // Finished only.
  FinishReason finish_reason = FinishReason::Stop;
  std::string matched_stop;    // Stop by a stop string: which one ("" for an end token)
  std::string error;           // FinishReason::Error: what went wrong
  bool queue_timeout = false;  // Error: it never started within the queue timeout (retryable)
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache (not computed)
  // Of those, read back from the local disk tier / the shared (Redis) tier; the rest were in L2.
  int cached_tokens_disk = 0;
  int cached_tokens_shared = 0;
  int completion_tokens = 0;
  double ttft_ms = 0;   // submit to first token
  double total_ms = 0;  // submit to finish
  // Level 3 (R-PR3): decisions taken during decode, and the plan the last tokens ran under
  // (null: the whole model), which may differ from the admission plan.
  int adaptive_decisions = 0;
  std::shared_ptr<const ComputePlan> final_plan;
  // Speculative decoding: draft tokens the full model verified, and of those the ones it kept.
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  // Finished (Stop) of an embedding request: the vector, model dim floats of unit length.
  std::vector<float> embedding;
};

// Called on the engine thread, in order, ending with exactly one Finished event. It must return
// quickly (hand the event to another thread) and must not call back into the engine.
using EventCallback = std::function<void(const GenerationEvent&)>;

}  // namespace k25
