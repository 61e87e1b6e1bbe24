// The server's one way into the engine (R-API6): include/k25.h, wrapped for C++ so that the rest
// of the server deals in C++ values: requests, admissions and events are translated to and from
// the C structs here and nowhere else. Beside the handle, the model's tokenizer for the front end
// (prompts, chat templates and logprob texts are the HTTP side's work, as in vLLM's API server).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/finish_reason.h"
#include "k25.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

namespace k25 {

using RequestId = uint64_t;

struct EngineRequest {
  std::vector<TokenId> prompt;  // must be non-empty
  int max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;     // stop strings
  std::vector<TokenId> stop_tokens;  // end the output like end-of-generation tokens
  int top_logprobs = -1;             // < 0: none
  bool ignore_eos = false;
  std::string session_id;   // "" = none
  std::string grammar;      // GBNF text (start rule root); "" = unconstrained
  std::string speculative;  // "off", "ngram", "auto"; "" = the engine's default
  std::string embedding;    // a pooling ("mean", "cls", "last"): an embedding request
  // Flash hints (R-FP1): the engine fingerprints and plans the request from them.
  std::string latency_sla = "silver";  // gold, silver, bronze
  std::string domain_hint;             // "" = none (SimHash decides)
  int response_length = 0;             // x-response-length; <= 0 = none
  std::string fingerprint_text;        // the text the SimHash reads (a chat: rendered)
  bool pruning = true;                 // false: the full model ("pruning": "off")
};

enum class AdmissionStatus { Accepted, Invalid, UnknownDomain, QueueFull, ShuttingDown, Failed };

// What k25_submit said about a request.
struct Admission {
  AdmissionStatus status = AdmissionStatus::Accepted;
  RequestId id = 0;
  std::string message;  // why, when not accepted
  // R-PR5: Flash's decision for an accepted request.
  std::string domain = "default";
  int flash_level = 0;
  double compute_saved = 0;
  std::string plan = "full";  // ComputePlan::describe()'s text
};

struct EngineEvent {
  enum class Kind { Token, Finished };
  Kind kind = Kind::Token;
  TokenId token = -1;  // Token: the sampled token
  std::string text;    // text that became final with it (Finished: the held-back rest)
  std::optional<TokenLogprobs> logprobs;
  // Finished only.
  FinishReason finish_reason = FinishReason::Stop;
  std::string matched_stop;
  std::string error;
  bool queue_timeout = false;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int cached_tokens_disk = 0;
  int cached_tokens_shared = 0;
  int completion_tokens = 0;
  double ttft_ms = 0;
  double total_ms = 0;
  int adaptive_decisions = 0;
  std::string final_plan = "full";
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  std::vector<float> embedding;
};

// Called on the engine's thread, in order, ending with one Finished event; it must return
// quickly and must not call back into the engine.
using EngineEventCallback = std::function<void(const EngineEvent&)>;

class EngineClient {
 public:
  // Neither is owned: both must outlive the client.
  EngineClient(k25_engine* engine, const Tokenizer& tokenizer);

  Admission submit(const EngineRequest& request, EngineEventCallback on_event);
  void cancel(RequestId id);
  void cancel_all();
  int n_active() const;
  // Positions the engine computed for the request so far (0 once it is forgotten).
  int64_t progress(RequestId id) const;
  bool knows_domain(std::string_view domain) const;
  int context_size() const;
  const k25_model_info& model_info() const { return info_; }
  std::string metrics() const;  // the engine's and Flash's Prometheus text
  const Tokenizer& tokenizer() const { return tokenizer_; }

 private:
  k25_engine* engine_;
  const Tokenizer& tokenizer_;
  k25_model_info info_{};
};

}  // namespace k25
