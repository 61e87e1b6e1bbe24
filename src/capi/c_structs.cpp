#include "capi/c_structs.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "flash/request_hints.h"
#include "model/grammar.h"
#include "model/json_schema_grammar.h"

namespace k25::capi {

namespace {

std::vector<int32_t> token_array(const int32_t* tokens, size_t n, int n_vocab, const char* what) {
  if (n > 0 && !tokens) fail("k25_submit: ", what, " is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      fail("k25_submit: ", what, "[", i, "] = ", tokens[i], " is not a token id (", n_vocab,
           " in the vocabulary)");
    }
  }
  return std::vector<int32_t>(tokens, tokens + n);
}

}  // namespace

GenerationRequest to_generation_request(const k25_request& c, const Tokenizer& tokenizer,
                                        SpeculativeMode default_mode) {
  const int n_vocab = tokenizer.n_vocab();
  GenerationRequest r;
  if (c.prompt) {
    r.prompt = tokenizer.encode(c.prompt, c.add_special != 0, true);
  } else if (c.prompt_tokens && c.n_prompt_tokens > 0) {
    r.prompt = token_array(c.prompt_tokens, c.n_prompt_tokens, n_vocab, "prompt_tokens");
  } else {
    fail("k25_submit: a prompt (text or tokens) is required");
  }
  r.max_tokens = c.max_tokens;
  SamplingParams& sampling = r.sampling;
  sampling.temperature = c.temperature;
  sampling.top_p = c.top_p;
  sampling.top_k = c.top_k;
  sampling.min_p = c.min_p;
  sampling.repeat_penalty = c.repeat_penalty;
  sampling.repeat_last_n = c.repeat_last_n;
  sampling.presence_penalty = c.presence_penalty;
  sampling.frequency_penalty = c.frequency_penalty;
  if (c.n_logit_bias > 0 && !c.logit_bias_values) fail("k25_submit: logit_bias_values is NULL");
  const std::vector<int32_t> biased =
      token_array(c.logit_bias_tokens, c.n_logit_bias, n_vocab, "logit_bias_tokens");
  for (size_t i = 0; i < biased.size(); ++i) {
    sampling.logit_bias.emplace_back(biased[i], c.logit_bias_values[i]);
  }
  if (c.has_seed) sampling.seed = c.seed;
  if (c.n_stop > 0 && !c.stop) fail("k25_submit: stop is NULL");
  for (size_t i = 0; i < c.n_stop; ++i) {
    if (!c.stop[i] || !*c.stop[i]) fail("k25_submit: empty stop string");
    r.stop.emplace_back(c.stop[i]);
  }
  r.stop_tokens = token_array(c.stop_tokens, c.n_stop_tokens, n_vocab, "stop_tokens");
  LatencySla sla = LatencySla::Silver;
  if (c.latency_sla) {
    std::optional<LatencySla> given = parse_latency_sla(c.latency_sla);
    if (!given) {
      fail("k25_submit: latency_sla must be gold, silver or bronze, got '", c.latency_sla, "'");
    }
    sla = *given;
  }
  r.priority = sla_priority(sla);
  r.ignore_eos = c.ignore_eos != 0;
  if (c.top_logprobs > 20) fail("k25_submit: top_logprobs is at most 20");
  r.top_logprobs = c.top_logprobs < 0 ? -1 : c.top_logprobs;
  if (c.session_id) r.session_id = c.session_id;
  if (c.grammar && c.json_schema) fail("k25_submit: give grammar or json_schema, not both");
  if (c.grammar) r.grammar = compile_gbnf(c.grammar);
  if (c.json_schema) {
    const auto schema = nlohmann::ordered_json::parse(c.json_schema, nullptr, false);
    if (schema.is_discarded()) fail("k25_submit: json_schema is not JSON");
    r.grammar = compile_json_schema(schema);
  }
  r.speculative = default_mode;
  if (c.speculative) {
    const std::optional<SpeculativeMode> mode = parse_speculative_mode(c.speculative);
    if (!mode)
      fail("k25_submit: speculative must be off, ngram, self or auto, got '", c.speculative, "'");
    r.speculative = *mode;
  }
  if (c.embedding) {
    r.embedding = parse_pooling(c.embedding);
    if (!r.embedding) {
      fail("k25_submit: embedding must be mean, cls or last, got '", c.embedding, "'");
    }
  }
  return r;
}

k25_event to_c_event(const GenerationEvent& e, int64_t request_id, EventBuffers& buffers) {
  std::vector<int32_t>& top_tokens = buffers.top_tokens;
  std::vector<float>& top_logprobs = buffers.top_logprobs;
  k25_event event{};
  event.kind = e.kind == GenerationEvent::Kind::Token ? K25_EVENT_TOKEN : K25_EVENT_FINISHED;
  event.request_id = request_id;
  event.token = e.token;
  event.text = e.text.c_str();
  event.text_len = e.text.size();
  top_tokens.clear();
  top_logprobs.clear();
  if (e.logprobs) {
    event.has_logprob = 1;
    event.logprob = e.logprobs->logprob;
    for (const auto& [token, logprob] : e.logprobs->top) {
      top_tokens.push_back(token);
      top_logprobs.push_back(logprob);
    }
    event.n_top = static_cast<int>(top_tokens.size());
    event.top_tokens = top_tokens.data();
    event.top_logprobs = top_logprobs.data();
  }
  event.finish_reason = finish_reason_name(e.finish_reason);
  event.error = e.error.c_str();
  event.prompt_tokens = e.prompt_tokens;
  event.cached_tokens = e.cached_tokens;
  event.completion_tokens = e.completion_tokens;
  event.ttft_ms = e.ttft_ms;
  event.total_ms = e.total_ms;
  event.matched_stop = e.matched_stop.c_str();
  event.queue_timeout = e.queue_timeout ? 1 : 0;
  event.cached_tokens_disk = e.cached_tokens_disk;
  event.cached_tokens_shared = e.cached_tokens_shared;
  event.adaptive_decisions = e.adaptive_decisions;
  buffers.final_plan = e.final_plan ? e.final_plan->describe() : "full";
  event.final_plan = buffers.final_plan.c_str();
  event.drafted_tokens = e.drafted_tokens;
  event.accepted_tokens = e.accepted_tokens;
  event.embedding = e.embedding.empty() ? nullptr : e.embedding.data();
  event.n_embedding = e.embedding.size();
  return event;
}

}  // namespace k25::capi
