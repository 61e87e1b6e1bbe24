#include "server/engine_client.h"

#include <cstring>
#include <memory>

#include "core/error.h"

namespace k25 {

namespace {

FinishReason finish_reason_of(const char* name) {
  for (FinishReason r :
       {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled, FinishReason::Error}) {
    if (std::strcmp(name, finish_reason_name(r)) == 0) return r;
  }
  return FinishReason::Error;
}

AdmissionStatus admission_status(k25_status status) {
  switch (status) {
    case K25_OK:
      return AdmissionStatus::Accepted;
    case K25_INVALID_REQUEST:
      return AdmissionStatus::Invalid;
    case K25_UNKNOWN_DOMAIN:
      return AdmissionStatus::UnknownDomain;
    case K25_QUEUE_FULL:
      return AdmissionStatus::QueueFull;
    case K25_SHUTTING_DOWN:
      return AdmissionStatus::ShuttingDown;
    case K25_FAILED:
      break;
  }
  return AdmissionStatus::Failed;
}

EngineEvent to_event(const k25_event& e) {
  EngineEvent out;
  out.kind = e.kind == K25_EVENT_TOKEN ? EngineEvent::Kind::Token : EngineEvent::Kind::Finished;
  out.token = e.token;
  out.text.assign(e.text, e.text_len);
  if (e.kind == K25_EVENT_TOKEN) {
    if (e.has_logprob) {
      TokenLogprobs lp;
      lp.logprob = e.logprob;
      for (int i = 0; i < e.n_top; ++i) lp.top.emplace_back(e.top_tokens[i], e.top_logprobs[i]);
      out.logprobs = std::move(lp);
    }
    return out;
  }
  out.finish_reason = finish_reason_of(e.finish_reason);
  out.matched_stop = e.matched_stop;
  out.error = e.error;
  out.queue_timeout = e.queue_timeout != 0;
  out.prompt_tokens = e.prompt_tokens;
  out.cached_tokens = e.cached_tokens;
  out.cached_tokens_disk = e.cached_tokens_disk;
  out.cached_tokens_shared = e.cached_tokens_shared;
  out.completion_tokens = e.completion_tokens;
  out.ttft_ms = e.ttft_ms;
  out.total_ms = e.total_ms;
  out.adaptive_decisions = e.adaptive_decisions;
  out.final_plan = e.final_plan;
  out.drafted_tokens = e.drafted_tokens;
  out.accepted_tokens = e.accepted_tokens;
  out.embedding.assign(e.embedding, e.embedding + e.n_embedding);
  return out;
}

// The C callback: the request's C++ callback travels as user_data and goes with its last event.
void deliver(const k25_event* event, void* user_data) {
  auto* callback = static_cast<EngineEventCallback*>(user_data);
  (*callback)(to_event(*event));
  if (event->kind == K25_EVENT_FINISHED) delete callback;
}

const char* c_str_or_null(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}

}  // namespace

EngineClient::EngineClient(k25_engine* engine, const Tokenizer& tokenizer)
    : engine_(engine), tokenizer_(tokenizer) {
  info_.struct_size = sizeof info_;
  if (k25_get_model_info(engine_, &info_) != 0) fail("k25_get_model_info failed");
}

Admission EngineClient::submit(const EngineRequest& r, EngineEventCallback on_event) {
  k25_request c;
  k25_request_init(&c);
  c.prompt_tokens = r.prompt.data();
  c.n_prompt_tokens = r.prompt.size();
  c.max_tokens = r.max_tokens;
  const SamplingParams& s = r.sampling;
  c.temperature = s.temperature;
  c.top_p = s.top_p;
  c.top_k = s.top_k;
  c.min_p = s.min_p;
  c.repeat_penalty = s.repeat_penalty;
  c.repeat_last_n = s.repeat_last_n;
  c.presence_penalty = s.presence_penalty;
  c.frequency_penalty = s.frequency_penalty;
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;
  for (const auto& [token, bias] : s.logit_bias) {
    bias_tokens.push_back(token);
    bias_values.push_back(bias);
  }
  c.logit_bias_tokens = bias_tokens.data();
  c.logit_bias_values = bias_values.data();
  c.n_logit_bias = bias_tokens.size();
  c.has_seed = s.seed.has_value();
  c.seed = s.seed.value_or(0);
  std::vector<const char*> stops;
  for (const std::string& stop : r.stop) stops.push_back(stop.c_str());
  c.stop = stops.data();
  c.n_stop = stops.size();
  c.stop_tokens = r.stop_tokens.data();
  c.n_stop_tokens = r.stop_tokens.size();
  c.top_logprobs = r.top_logprobs;
  c.ignore_eos = r.ignore_eos ? 1 : 0;
  c.session_id = c_str_or_null(r.session_id);
  c.grammar = c_str_or_null(r.grammar);
  c.speculative = c_str_or_null(r.speculative);
  c.embedding = c_str_or_null(r.embedding);
  c.latency_sla = r.latency_sla.c_str();
  c.domain_hint = c_str_or_null(r.domain_hint);
  c.response_length = r.response_length;
  c.fingerprint_text = r.fingerprint_text.c_str();
  c.pruning = r.pruning ? 1 : 0;

  auto callback = std::make_unique<EngineEventCallback>(std::move(on_event));
  k25_submit_info info;
  k25_submit_info_init(&info);
  char* error = nullptr;
  const int64_t id = k25_submit(engine_, &c, deliver, callback.get(), &info, &error);
  Admission out;
  out.status = admission_status(info.status);
  if (id <= 0) {
    out.message = error ? error : "k25_submit failed";
    k25_free_string(error);
    if (out.status == AdmissionStatus::Accepted) out.status = AdmissionStatus::Failed;
    return out;  // the engine never saw the callback
  }
  callback.release();  // deliver() deletes it with the request's last event
  out.id = static_cast<RequestId>(id);
  out.domain = info.domain;
  out.flash_level = info.flash_level;
  out.compute_saved = info.compute_saved;
  out.plan = info.plan;
  k25_free_string(info.plan);
  return out;
}

void EngineClient::cancel(RequestId id) {
  k25_cancel(engine_, static_cast<int64_t>(id));
}

void EngineClient::cancel_all() {
  k25_cancel_all(engine_);
}

int EngineClient::n_active() const {
  return k25_n_active(engine_);
}

int64_t EngineClient::progress(RequestId id) const {
  return std::max<int64_t>(0, k25_progress(engine_, static_cast<int64_t>(id)));
}

bool EngineClient::knows_domain(std::string_view domain) const {
  return k25_knows_domain(engine_, std::string(domain).c_str()) != 0;
}

int EngineClient::context_size() const {
  return k25_context_size(engine_);
}

std::string EngineClient::metrics() const {
  char* text = k25_metrics(engine_);
  std::string out = text ? text : "";
  k25_free_string(text);
  return out;
}

}  // namespace k25
