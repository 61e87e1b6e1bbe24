// The generation routes: /generate, /v1/completions, /v1/chat/completions, /v1/messages, whole
// or streamed, with n choices where OpenAI allows them; with a fallback configured, the circuit
// breaker decides engine or upstream (R-CFG3).
#include <ctime>
#include <iostream>

#include "core/error.h"
#include "server/anthropic_request.h"
#include "server/api.h"
#include "server/api_error.h"
#include "server/event_channel.h"
#include "server/first_token_watch.h"
#include "server/flash_headers.h"
#include "server/generation_call.h"
#include "server/request_log.h"
#include "server/response_format.h"
#include "server/response_stream.h"
#include "server/tool_call_grammar.h"
#include "server/tool_call_response.h"
#include "server/tool_call_stream.h"

namespace k25 {

using nlohmann::json;

namespace {

// How often a waiting request looks whether its client is still there.
constexpr std::chrono::milliseconds kClientCheckInterval{100};
// Session ids are logged with every request; a bound keeps the log lines sane.
constexpr size_t kMaxSessionIdBytes = 256;

std::optional<std::string_view> header_value(const HttpRequest& req, std::string_view name) {
  auto it = req.find(beast::string_view(name.data(), name.size()));
  if (it == req.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

TokenLogprobEntry logprob_entry(const Tokenizer& tokenizer, TokenId token,
                                const TokenLogprobs& lp) {
  TokenLogprobEntry e;
  e.piece = tokenizer.token_to_piece(token, false);
  e.logprob = lp.logprob;
  for (const auto& [id, value] : lp.top)
    e.top.emplace_back(tokenizer.token_to_piece(id, false), value);
  return e;
}

void fill_outcome(GenerationOutcome& o, const EngineEvent& finished) {
  o.text += finished.text;
  o.finish_reason = finished.finish_reason;
  o.matched_stop = finished.matched_stop;
  o.prompt_tokens = finished.prompt_tokens;
  o.cached_tokens = finished.cached_tokens;
  o.cached_tokens_disk = finished.cached_tokens_disk;
  o.cached_tokens_shared = finished.cached_tokens_shared;
  o.completion_tokens = finished.completion_tokens;
  o.ttft_ms = finished.ttft_ms;
  o.total_ms = finished.total_ms;
  o.adaptive_decisions = finished.adaptive_decisions;
  o.final_plan = finished.final_plan;
  o.drafted_tokens = finished.drafted_tokens;
  o.accepted_tokens = finished.accepted_tokens;
}

// `total`: the usage of every choice (summed_usage); the finish reason and TTFT of choice 0.
void log_outcome(RequestLog& log, const GenerationOutcome& total, const GenerationOutcome& first) {
  log.prompt_tokens = total.prompt_tokens;
  log.cached_tokens = total.cached_tokens;
  log.completion_tokens = total.completion_tokens;
  log.finish_reason = finish_reason_name(first.finish_reason);
  log.ttft_ms = first.ttft_ms;
}

ApiError status_error(int status, std::string message, std::string code, std::string type,
                      int retry_after_s = 0) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.code = std::move(code);
  e.type = std::move(type);
  e.retry_after_s = retry_after_s;
  return e;
}

// A request the engine could not start within the queue timeout may be retried (503); any other
// generation failure is the server's (500).
ApiError generation_error(const EngineEvent& event, int retry_after_s) {
  if (event.queue_timeout) {
    return status_error(503, event.error, "queue_timeout", "service_unavailable", retry_after_s);
  }
  return status_error(500, "generation failed: " + event.error, "internal_error", "server_error");
}

// What ends a request that did not finish normally. OpenAI's and Anthropic's clients know no
// "cancelled" or "error" finish reason: they get the API's error instead. A cancel that reaches
// a client that is still there comes from a shutdown. /generate keeps its own finish reasons.
std::optional<ApiError> failure_of(ApiFlavor flavor, const EngineEvent& event, int retry_after_s) {
  if (event.finish_reason == FinishReason::Error) return generation_error(event, retry_after_s);
  if (event.finish_reason == FinishReason::Cancelled && flavor != ApiFlavor::Generate) {
    return status_error(503,
                        "the request was cancelled before it finished: the server is shutting down",
                        "cancelled", "service_unavailable", retry_after_s);
  }
  return std::nullopt;
}

// The events a streaming client has not taken outgrew api_server.stream_buffer_bytes: it
// stopped reading (the socket buffers in front of it are full too). The request is cancelled
// rather than paused: a paused request would hold its batch slot and KV pages, which others
// wait for, for as long as the client likes. A client that reads again gets this error.
ApiError slow_reader_error(int64_t limit_bytes, int retry_after_s) {
  return status_error(503,
                      concat("the client did not read the stream: more than ", limit_bytes,
                             " bytes of events waited for it; the request was cancelled"),
                      "slow_reader", "service_unavailable", retry_after_s);
}

const char* response_id_prefix(ApiFlavor flavor) {
  switch (flavor) {
    case ApiFlavor::Chat:
      return "chatcmpl-";
    case ApiFlavor::Messages:
      return "msg_";
    default:
      return "cmpl-";
  }
}

const char* session_field(ApiFlavor flavor) {
  switch (flavor) {
    case ApiFlavor::Generate:
      return "session_id";
    case ApiFlavor::Messages:
      return "metadata.user_id";
    default:
      return "user";
  }
}

void log_fallback_error(const std::string& id, const std::string& error) {
  json line = {{"event", "fallback_error"}, {"id", id}, {"error", error}};
  std::cerr << json_text(line) + "\n";
}

// What every response of this request says about it (ids, model, fingerprint and plan).
ResponseContext response_context(const GenerationCall& call, const std::string& model_name) {
  ResponseContext ctx;
  ctx.flavor = call.flavor;
  ctx.id = call.log.id;
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.model = model_name;
  ctx.hints = call.hints;
  ctx.flash_domain = call.admission.domain;
  ctx.flash_level = call.admission.flash_level;
  ctx.plan = call.admission.plan;
  ctx.compute_saved = call.admission.compute_saved;
  ctx.include_usage = call.parsed.include_usage;
  ctx.prompt_tokens = call.n_prompt;
  ctx.stop_sequences = call.parsed.stop;
  return ctx;
}

}  // namespace

net::awaitable<void> Api::generation(HttpExchange& ex, ApiFlavor flavor, RequestLog& log) {
  GenerationCall call(ex, flavor, log, serving_engine());
  if (!co_await prepare_generation(call)) co_return;
  log.id = concat(response_id_prefix(flavor), next_response_id_++);

  // R-CFG3: while the circuit is open the upstream answers; when it cannot be reached, the
  // engine does, however slowly (a request is never dropped).
  const auto submitted_at = std::chrono::steady_clock::now();
  const CircuitBreaker::Route route =
      breaker_ ? breaker_->route(submitted_at) : CircuitBreaker::Route::Engine;
  if (route == CircuitBreaker::Route::Fallback && co_await serve_by_fallback(ex, log)) co_return;
  const bool watch_first_token = breaker_ && route != CircuitBreaker::Route::Fallback;
  const bool probe = route == CircuitBreaker::Route::Probe;
  log.served_by = "engine";

  call.channel = std::make_shared<EventChannel>(co_await net::this_coro::executor,
                                                static_cast<size_t>(config_.stream_buffer_bytes));
  submit_choices(call, probe);
  std::optional<ChoiceEvent> first;
  if (watch_first_token && co_await await_first_event(call, submitted_at, probe, first)) co_return;
  co_await answer(call, first);
}

net::awaitable<bool> Api::prepare_generation(GenerationCall& call) {
  const HttpRequest& req = call.ex.request();
  const ApiFlavor flavor = call.flavor;
  RequestLog& log = call.log;
  if (config_.enable_header_passthrough) {
    call.hints =
        parse_flash_headers([&](std::string_view name) { return header_value(req, name); });
  }
  log.sla = sla_name(call.hints.sla);
  log.domain = call.hints.domain;
  if (!call.engine.knows_domain(call.hints.domain)) {
    std::string message = concat("x-domain-hint: no gate for domain '", call.hints.domain, "'");
    if (flavor == ApiFlavor::Generate) {
      // The note's short form.
      json body = {
          {"error", "gate not found"}, {"domain", call.hints.domain}, {"message", message}};
      co_await call.ex.send(400, "application/json", json_text(body));
      co_return false;
    }
    throw ApiException(status_error(400, message, "gate_not_found", "invalid_request_error"));
  }
  call.parsed = co_await prompt_workers_.run(req.body().size(), [&] {
    return flavor == ApiFlavor::Messages ? parse_messages_body(req.body(), defaults_)
                                         : parse_request_body(flavor, req.body(), defaults_);
  });
  call.chat = flavor == ApiFlavor::Chat || flavor == ApiFlavor::Messages;
  const ParsedRequest& parsed = call.parsed;
  EngineRequest& request = call.request;
  std::string chat_text;  // the rendered chat, fingerprinted like a prompt
  co_await tokenise_prompt(call, chat_text);
  request.max_tokens = resolve_max_tokens(parsed, defaults_, call.n_prompt);
  request.sampling = parsed.sampling;
  request.stop.insert(request.stop.end(), parsed.stop.begin(), parsed.stop.end());
  request.top_logprobs = parsed.top_logprobs;
  request.ignore_eos = parsed.ignore_eos;
  request.grammar = parsed.grammar;
  // A forced call has no text answer for response_format to shape: its grammar is the call's.
  if (parsed.tools.forces_call()) {
    request.grammar = forced_tool_call_grammar(tool_call_format_, parsed.tools, parsed.tool_specs);
  }
  // R-KV4: the x-session-id header names the session for every endpoint and wins over the body.
  request.session_id = parsed.session_id;
  if (auto session = header_value(req, "x-session-id"); session && !session->empty()) {
    request.session_id = std::string(*session);
  }
  if (request.session_id.size() > kMaxSessionIdBytes) {
    throw_bad_request(
        concat("session id: ", request.session_id.size(), " bytes; at most ", kMaxSessionIdBytes),
        session_field(flavor), "invalid_value");
  }
  log.session_id = request.session_id;
  // R-FP/R-PR: the hints the engine fingerprints and plans the request from.
  request.latency_sla = sla_name(call.hints.sla);
  if (call.hints.domain_given) request.domain_hint = call.hints.domain;
  request.response_length = call.hints.response_length.value_or(0);
  request.fingerprint_text = call.chat ? chat_text : parsed.prompt;
  request.pruning = !parsed.pruning_off;
  request.speculative = parsed.speculative;
  co_return true;
}

net::awaitable<void> Api::tokenise_prompt(GenerationCall& call, std::string& chat_text) {
  const ParsedRequest& parsed = call.parsed;
  const Tokenizer& tokenizer = call.engine.tokenizer();
  std::vector<TokenId>& prompt = call.request.prompt;
  const size_t body_bytes = call.ex.request().body().size();
  if (parsed.prompt_ids) {
    for (int64_t id : *parsed.prompt_ids) {
      if (id < 0 || id >= tokenizer.n_vocab()) {
        throw_bad_request(concat("prompt: ", id, " is not a token id (vocabulary size ",
                                 tokenizer.n_vocab(), ")"),
                          "prompt", "out_of_range");
      }
      prompt.push_back(static_cast<TokenId>(id));
    }
  } else if (call.chat) {
    prompt =
        co_await prompt_workers_.run(body_bytes, [&] { return chat_prompt(parsed, chat_text); });
    call.request.stop_tokens = chat_template_->stop_tokens();
    call.request.stop = chat_template_->stop_strings();
  } else {
    prompt = co_await prompt_workers_.run(
        parsed.prompt.size(), [&] { return tokenizer.encode(parsed.prompt, true, true); });
  }
  call.n_prompt = static_cast<int>(prompt.size());
  if (call.n_prompt == 0) throw_bad_request("the prompt has no tokens", "prompt", "invalid_value");
  if (call.n_prompt >= call.engine.context_size()) {
    throw_bad_request(concat("the prompt has ", call.n_prompt, " tokens; the context holds ",
                             call.engine.context_size(), " including at least one generated token"),
                      call.chat ? "messages" : "prompt", "context_length_exceeded");
  }
}

void Api::submit_choices(GenerationCall& call, bool probe) {
  // OpenAI's n: n engine requests of the same prompt (the prefix cache shares its KV once one
  // of them has computed it). With a seed, choice i samples with seed + i.
  std::optional<ApiError> refused;
  for (int i = 0; i < call.parsed.n && !refused; ++i) {
    EngineRequest choice_request = call.request;
    if (i > 0 && call.request.sampling.seed) {
      choice_request.sampling.seed = *call.request.sampling.seed + static_cast<uint64_t>(i);
    }
    Admission admitted = call.engine.submit(
        choice_request, [channel = call.channel, i](const EngineEvent& e) { channel->push(i, e); });
    switch (admitted.status) {
      case AdmissionStatus::Accepted:
        call.ids.push_back(admitted.id);
        if (i == 0) call.admission = std::move(admitted);
        break;
      case AdmissionStatus::QueueFull:
        refused = status_error(429, admitted.message, "queue_full", "rate_limit_error",
                               config_.retry_after_s);
        break;
      case AdmissionStatus::ShuttingDown:
        refused = status_error(503, admitted.message, "draining", "service_unavailable",
                               config_.retry_after_s);
        break;
      case AdmissionStatus::Invalid:
        refused = status_error(400, admitted.message, "invalid_value", "invalid_request_error");
        refused->param = "prompt";
        break;
      case AdmissionStatus::UnknownDomain:  // checked before; the gates cannot change
        refused = status_error(400, admitted.message, "gate_not_found", "invalid_request_error");
        break;
      case AdmissionStatus::Failed:
        refused = status_error(500, admitted.message, "internal_error", "server_error");
        break;
    }
  }
  if (refused) {
    if (probe) breaker_->on_probe_abandoned(std::chrono::steady_clock::now());
    call.cancel_all();
    throw ApiException(*refused);
  }
  call.log.request_id = call.ids.front();
  call.log.domain = call.admission.domain;
  call.log.flash_level = call.admission.flash_level;
  // A client that stops reading: the engine stops working for it (see slow_reader_error).
  call.channel->on_overflow([&engine = call.engine, ids = call.ids] {
    for (RequestId id : ids) engine.cancel(id);
  });
}

net::awaitable<bool> Api::await_first_event(GenerationCall& call,
                                            std::chrono::steady_clock::time_point submitted_at,
                                            bool probe, std::optional<ChoiceEvent>& first) {
  // The first event (token or finish), or the request times out: fallback.timeout_ms without
  // the engine computing any of it (server/first_token_watch.h).
  FirstTokenWatch watch(submitted_at, std::chrono::milliseconds(config_.fallback_timeout_ms),
                        [&call] { return call.progress(); });
  for (auto now = std::chrono::steady_clock::now();
       !first && !call.client_gone && now < watch.deadline(now);
       now = std::chrono::steady_clock::now()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(watch.deadline(now) - now);
    first = co_await call.channel->next(std::min(left, kClientCheckInterval));
    call.check_client(kClientCheckInterval);
  }
  const auto now = std::chrono::steady_clock::now();
  if (call.client_gone) {
    if (probe) breaker_->on_probe_abandoned(now);
    co_return true;  // cancelled; nobody to answer
  }
  if (first && !engine_failed(first->event)) {
    breaker_->on_success(probe);
    co_return false;
  }
  breaker_->on_failure(probe, now);
  if (!first) {
    ++fallback_counters_.timeouts;
    call.log.timed_out = true;
  }
  // Hand the request to the upstream. The engine keeps it until the upstream has answered, so
  // when the upstream cannot be reached the engine's late answer (or error) still goes out.
  const std::function<void()> cancel_choices = [&call] { call.cancel_all(); };
  co_return co_await serve_by_fallback(call.ex, call.log, &cancel_choices);
}

net::awaitable<void> Api::answer(GenerationCall& call, std::optional<ChoiceEvent>& first) {
  const ParsedRequest& parsed = call.parsed;
  HttpExchange& ex = call.ex;
  const int n_choices = parsed.n;
  const Tokenizer& tokenizer = call.engine.tokenizer();
  const ResponseContext ctx = response_context(call, model_name_);

  GenerationOutcome blank;
  blank.want_logprobs = parsed.top_logprobs >= 0;
  blank.prompt_tokens = call.n_prompt;
  std::vector<GenerationOutcome> outcomes(static_cast<size_t>(n_choices), blank);

  // Text goes out as soon as it is final; the logprobs of tokens whose text is still held back
  // travel with the next chunk that has text. Choices interleave as their tokens come.
  bool ok = true;
  if (parsed.stream) {
    ok = co_await ex.start_stream(200, "text/event-stream");
    const std::string opening = stream_opening(ctx, n_choices);
    if (ok && !opening.empty()) ok = co_await ex.send_chunk(opening);
  }
  std::vector<std::vector<TokenLogprobEntry>> pending_logprobs(outcomes.size());
  // With tools offered, streamed text that may be a tool call is held until it parses (or not).
  std::vector<std::optional<ToolCallStream>> tool_streams(outcomes.size());
  if (parsed.stream && parsed.tools.parses_calls()) {
    for (auto& stream : tool_streams) stream.emplace(tool_call_format_, parsed.tools.tools);
  }
  std::optional<ApiError> failure;
  std::optional<FinishReason> failed_as;
  for (int open = n_choices; open > 0 && !failure;) {
    if (!ok && !call.client_gone) call.client_left();
    std::optional<ChoiceEvent> next;
    if (first) {
      next.swap(first);
    } else {
      next = co_await call.channel->next(kClientCheckInterval);
      call.check_client(kClientCheckInterval);
    }
    if (!next && call.channel->overflowed()) {
      failure = slow_reader_error(config_.stream_buffer_bytes, config_.retry_after_s);
      failed_as = FinishReason::Cancelled;
    }
    if (!next) continue;
    const int index = next->choice;
    const EngineEvent& event = next->event;
    GenerationOutcome& outcome = outcomes[static_cast<size_t>(index)];
    std::vector<TokenLogprobEntry>& pending = pending_logprobs[static_cast<size_t>(index)];
    if (event.logprobs) pending.push_back(logprob_entry(tokenizer, event.token, *event.logprobs));
    std::optional<ToolCallStream>& tool_stream = tool_streams[static_cast<size_t>(index)];
    if (event.kind == EngineEvent::Kind::Token) {
      outcome.text += event.text;
      const std::string text = tool_stream ? tool_stream->push(event.text) : event.text;
      if (parsed.stream && !text.empty() && !call.client_gone) {
        std::string chunk =
            stream_text(ctx, index, text, outcome.want_logprobs ? &pending : nullptr);
        pending.clear();
        ok = co_await ex.send_chunk(chunk);
      }
      continue;
    }
    --open;
    fill_outcome(outcome, event);
    outcome.logprobs = parsed.stream ? std::vector<TokenLogprobEntry>() : std::move(pending);
    failure = failure_of(call.flavor, event, config_.retry_after_s);
    if (failure) failed_as = event.finish_reason;
    if (failure || !parsed.stream || call.client_gone) continue;
    std::string text = tool_stream ? tool_stream->push(event.text) : event.text;
    std::string calls;
    if (tool_stream) {
      outcome.tools = tool_stream->finish();
      assign_tool_call_ids(outcome.tools->calls, tool_call_format_);
      text += outcome.tools->content;
      if (!outcome.tools->calls.empty()) {
        calls = sse_event(stream_tool_calls_chunk(ctx, index, outcome.tools->calls));
      }
    }
    const std::string tail =
        stream_text(ctx, index, text, outcome.want_logprobs ? &pending : nullptr) + calls +
        stream_choice_end(ctx, index, outcome);
    ok = co_await ex.send_chunk(tail);
  }
  log_outcome(call.log, summed_usage(outcomes), outcomes.front());
  if (failure) {
    call.cancel_all();  // the other choices are of no use without this one
    call.log.error = failure->message;
    call.log.finish_reason = finish_reason_name(*failed_as);
  }
  if (call.client_gone) co_return;  // nobody to answer
  if (!parsed.stream) {
    if (failure) throw ApiException(*failure);
    if (parsed.tools.parses_calls()) {
      for (GenerationOutcome& outcome : outcomes) {
        outcome.tools = parse_tool_calls(tool_call_format_, outcome.text, parsed.tools.tools);
        assign_tool_call_ids(outcome.tools->calls, tool_call_format_);
      }
    }
    co_await ex.send(200, "application/json", json_text(full_response(ctx, outcomes)));
    co_return;
  }
  // A named string: GCC 12 destroys a conditional's temporary twice inside co_await.
  std::string closing = failure ? stream_error(ctx, *failure) : stream_closing(ctx, outcomes);
  if (ok) ok = co_await ex.send_chunk(closing);
  if (ok) co_await ex.end_stream();
}

net::awaitable<bool> Api::serve_by_fallback(HttpExchange& ex, RequestLog& log,
                                            const std::function<void()>* on_connected) {
  auto executor = co_await net::this_coro::executor;
  UpstreamCall call(executor, std::chrono::seconds(config_.read_timeout_s));
  std::string error;
  if (!co_await call.start(upstream_, ex.request(), error)) {
    ++fallback_counters_.upstream_errors;
    log_fallback_error(log.id, error);
    co_return false;
  }
  if (on_connected) (*on_connected)();
  co_await relay_fallback(ex, call, log);
  co_return true;
}

net::awaitable<void> Api::relay_fallback(HttpExchange& ex, UpstreamCall& call, RequestLog& log) {
  log.served_by = "fallback";
  ++fallback_counters_.proxied;
  std::string error;
  if (!co_await call.relay(ex, error)) {
    // Whatever reached the client cannot be taken back; the connection must not be reused.
    ++fallback_counters_.upstream_errors;
    log.error = error;
    ex.close_after();
  }
}

}  // namespace k25
