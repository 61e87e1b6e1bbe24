// The engine's state of one request (Engine::Sequence), shared by the engine's source files:
// engine.cpp (queue, step, schedule), engine_kv.cpp (KV residency and the tiers) and
// engine_run.cpp (forward calls, sampling, publishing).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/grammar_matcher.h"

namespace k25 {

struct Engine::Sequence {
  Sequence(RequestId id_, GenerationRequest request_, EventCallback on_event_, int n_vocab, int dim,
           const SpeculationOptions& speculation)
      : id(id_),
        request(std::move(request_)),
        on_event(std::move(on_event_)),
        sampler(request.sampling, n_vocab),
        stop_matcher(request.stop),
        tokens(request.prompt),
        submitted(Clock::now()),
        queued_since(submitted),
        draft_length(speculation) {
    if (request.embedding) pooler.emplace(*request.embedding, dim);
  }

  RequestId id;
  GenerationRequest request;
  EventCallback on_event;
  Sampler sampler;
  std::optional<GrammarMatcher> grammar;  // when the request has one
  StopMatcher stop_matcher;
  Utf8StreamDecoder utf8;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  int n_computed = 0;           // tokens whose K/V are in the cache
  int n_generated = 0;
  int kv_id = -1;  // sequence id in the KV cache while it holds pages or runs
  bool running = false;
  bool started = false;  // ran at least once (queue timeouts apply before that only)
  bool queue_timeout = false;
  bool finished = false;
  bool stop_string_matched = false;  // the output already ends just before a stop string
  std::string matched_stop;          // that stop string
  bool has_first_token = false;
  int max_computed = 0;  // positions ever computed (what a recompute repeats)
  // Positions [0, full_model_computed) of the KV were computed by the full model (no compute
  // plan), so their pages may be shared through the prefix cache.
  int full_model_computed = 0;
  int cached_tokens = 0;              // prompt tokens reused from the prefix cache at admission
  std::vector<uint64_t> prefix_keys;  // chained page keys of `tokens`, extended as needed
  // The prompt's prefix being read back from L3 / the shared tier (R-KV2): the sequence is not
  // scheduled until the reads complete (or time out), while the others keep computing.
  std::optional<PrefixRestore> restore;
  bool l3_asked = false;  // the prompt's pages missing in L2 were looked up in L3
  // The shared tier is asked which of the prompt's pages it holds (at most once per sequence);
  // unscheduled meanwhile, until the answer or the tier's read timeout.
  SharedTierProbe probe;
  // Of n_computed, positions restored from the disk / shared tier (the rest came from L2).
  int restored_disk_tokens = 0;
  int restored_shared_tokens = 0;
  // Queued while L3 holds more of its prompt than L2 and no read may start yet (no free batch
  // slot): not scheduled this step, so that it reads those pages later instead of computing them.
  bool awaiting_l3 = false;
  Clock::time_point submitted;
  Clock::time_point queued_since;  // submitted, or preempted last (aging while queued)
  Clock::time_point last_served;   // admitted or given a task last (aging while running)
  uint64_t last_prefill_step = 0;  // the engine step that last ran a chunk of its prompt
  Clock::time_point last_token;
  double ttft_ms = 0;
  // Embedding requests: takes the final hidden states as the prompt's positions are computed.
  std::optional<EmbeddingPooler> pooler;

  std::shared_ptr<const ComputePlan> current_plan = request.plan;  // Level 3 may change it
  AdaptiveState adaptive;

  // Speculative decoding: k of the next draft, this step's draft and the counts so far; with
  // self-speculation, the pruned plan that drafts (the sequence itself runs the whole model).
  DraftLength draft_length;
  std::shared_ptr<const ComputePlan> draft_plan;
  std::vector<TokenId> draft;
  int drafted_tokens = 0;
  int accepted_tokens = 0;

  // The compute plan (R-PR1), or null for the whole model (a full plan counts as none).
  const ComputePlan* plan() const {
    return current_plan && !current_plan->is_full() ? current_plan.get() : nullptr;
  }
};

}  // namespace k25
