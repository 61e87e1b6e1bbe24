// The generation routes: /generate, /v1/completions, /v1/chat/completions, whole or streamed.
#include <ctime>

#include "server/api.h"
#include "server/api_error.h"
#include "server/event_channel.h"
#include "server/flash_headers.h"
#include "server/request_log.h"
#include "server/response_format.h"
#include "util/error.h"

namespace k25 {

using nlohmann::json;

namespace {

// How often a waiting request looks whether its client is still there.
constexpr std::chrono::milliseconds kClientCheckInterval{100};

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

void fill_outcome(GenerationOutcome& o, const GenerationEvent& finished) {
  o.text += finished.text;
  o.finish_reason = finished.finish_reason;
  o.prompt_tokens = finished.prompt_tokens;
  o.completion_tokens = finished.completion_tokens;
  o.ttft_ms = finished.ttft_ms;
  o.total_ms = finished.total_ms;
}

void log_outcome(RequestLog& log, const GenerationOutcome& o) {
  log.prompt_tokens = o.prompt_tokens;
  log.completion_tokens = o.completion_tokens;
  log.finish_reason = finish_reason_name(o.finish_reason);
  log.ttft_ms = o.ttft_ms;
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

}  // namespace

net::awaitable<void> Api::generation(HttpExchange& ex, ApiFlavor flavor, RequestLog& log) {
  Engine& engine = serving_engine();
  const HttpRequest& req = ex.request();
  FlashHints hints;
  if (config_.enable_header_passthrough) {
    hints = parse_flash_headers([&](std::string_view name) { return header_value(req, name); });
  }
  log.sla = sla_name(hints.sla);
  log.domain = hints.domain;
  if (!is_known_domain(hints.domain)) {
    std::string message = concat("x-domain-hint: no gate for domain '", hints.domain, "'");
    if (flavor == ApiFlavor::Generate) {
      // The note's short form.
      json body = {{"error", "gate not found"}, {"domain", hints.domain}, {"message", message}};
      co_await ex.send(400, "application/json", json_text(body));
      co_return;
    }
    throw ApiException(status_error(400, message, "gate_not_found", "invalid_request_error"));
  }
  ParsedRequest parsed = parse_request_body(flavor, req.body(), defaults_);

  const Tokenizer& tokenizer = engine.model().tokenizer();
  GenerationRequest request;
  if (parsed.prompt_ids) {
    for (int64_t id : *parsed.prompt_ids) {
      if (id < 0 || id >= tokenizer.n_vocab()) {
        throw_bad_request(concat("prompt: ", id, " is not a token id (vocabulary size ",
                                 tokenizer.n_vocab(), ")"),
                          "prompt", "out_of_range");
      }
      request.prompt.push_back(static_cast<TokenId>(id));
    }
  } else if (flavor == ApiFlavor::Chat) {
    request.prompt = tokenizer.encode(render_chat(chat_template_, parsed.messages), true, true);
    request.stop_tokens = chat_stop_tokens_;
    request.stop = chat_stop_strings_;
  } else {
    request.prompt = tokenizer.encode(parsed.prompt, true, true);
  }
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) throw_bad_request("the prompt has no tokens", "prompt", "invalid_value");
  if (n_prompt >= engine.context_size()) {
    throw_bad_request(concat("the prompt has ", n_prompt, " tokens; the context holds ",
                             engine.context_size(), " including at least one generated token"),
                      flavor == ApiFlavor::Chat ? "messages" : "prompt", "context_length_exceeded");
  }
  request.max_tokens = parsed.max_tokens;
  request.sampling = parsed.sampling;
  request.stop.insert(request.stop.end(), parsed.stop.begin(), parsed.stop.end());
  request.top_logprobs = parsed.top_logprobs;
  request.priority = sla_priority(hints.sla);

  auto channel = std::make_shared<EventChannel>(co_await net::this_coro::executor);
  SubmitResult submitted =
      engine.submit(std::move(request), [channel](const GenerationEvent& e) { channel->push(e); });
  switch (submitted.status) {
    case SubmitStatus::Accepted:
      break;
    case SubmitStatus::QueueFull:
      throw ApiException(status_error(429, submitted.message, "queue_full", "rate_limit_error",
                                      config_.retry_after_s));
    case SubmitStatus::ShuttingDown:
      throw ApiException(status_error(503, submitted.message, "draining", "service_unavailable",
                                      config_.retry_after_s));
    case SubmitStatus::Invalid:
      throw_bad_request(submitted.message, "prompt", "invalid_value");
  }
  log.request_id = submitted.id;

  ResponseContext ctx;
  ctx.flavor = flavor;
  const uint64_t response_id = next_response_id_++;
  ctx.id = concat(flavor == ApiFlavor::Chat ? "chatcmpl-" : "cmpl-", response_id);
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  ctx.model = model_name_;
  ctx.hints = hints;
  ctx.include_usage = parsed.include_usage;

  GenerationOutcome outcome;
  outcome.want_logprobs = parsed.top_logprobs >= 0;
  outcome.prompt_tokens = n_prompt;
  bool client_gone = false;
  auto cancel_for_gone_client = [&] {
    if (!client_gone) engine.cancel(submitted.id);
    client_gone = true;
    ex.close_after();
  };
  // Looks at the client at most every kClientCheckInterval, whether events flow or not.
  auto next_client_check = std::chrono::steady_clock::now();
  auto check_client = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (client_gone || now < next_client_check) return;
    next_client_check = now + kClientCheckInterval;
    if (ex.peer_closed()) cancel_for_gone_client();
  };

  if (!parsed.stream) {
    for (;;) {
      std::optional<GenerationEvent> event = co_await channel->next(kClientCheckInterval);
      check_client();
      if (!event) continue;
      if (event->kind == GenerationEvent::Kind::Token) {
        outcome.text += event->text;
        if (event->logprobs) {
          outcome.logprobs.push_back(logprob_entry(tokenizer, event->token, *event->logprobs));
        }
        continue;
      }
      fill_outcome(outcome, *event);
      log_outcome(log, outcome);
      if (event->finish_reason == FinishReason::Error) {
        throw ApiException(status_error(500, "generation failed: " + event->error, "internal_error",
                                        "server_error"));
      }
      break;
    }
    if (client_gone) co_return;  // nobody to answer
    json body = full_response(ctx, outcome);
    co_await ex.send(200, "application/json", json_text(body));
    co_return;
  }

  // Streaming: text goes out as soon as it is final; the logprobs of tokens whose text is still
  // held back travel with the next chunk that has text.
  bool ok = co_await ex.start_stream(200, "text/event-stream");
  json start = stream_start_chunk(ctx);
  if (ok && !start.is_null()) ok = co_await ex.send_chunk(sse_event(start));
  std::vector<TokenLogprobEntry> pending_logprobs;
  for (;;) {
    if (!ok && !client_gone) cancel_for_gone_client();
    std::optional<GenerationEvent> event = co_await channel->next(kClientCheckInterval);
    check_client();
    if (!event) continue;
    if (event->logprobs) {
      pending_logprobs.push_back(logprob_entry(tokenizer, event->token, *event->logprobs));
    }
    if (event->kind == GenerationEvent::Kind::Token) {
      outcome.text += event->text;
      if (!event->text.empty() && !client_gone) {
        json chunk = stream_text_chunk(ctx, event->text,
                                       outcome.want_logprobs ? &pending_logprobs : nullptr);
        pending_logprobs.clear();
        ok = co_await ex.send_chunk(sse_event(chunk));
      }
      continue;
    }
    fill_outcome(outcome, *event);
    log_outcome(log, outcome);
    if (client_gone) co_return;
    if (event->finish_reason == FinishReason::Error) {
      ApiError error =
          status_error(500, "generation failed: " + event->error, "internal_error", "server_error");
      log.error = error.message;
      ok = co_await ex.send_chunk(sse_event(error_body(error)));
    } else {
      if (!event->text.empty() || !pending_logprobs.empty()) {
        json chunk = stream_text_chunk(ctx, event->text,
                                       outcome.want_logprobs ? &pending_logprobs : nullptr);
        ok = co_await ex.send_chunk(sse_event(chunk));
      }
      std::vector<json> final_chunks = stream_final_chunks(ctx, outcome);
      for (size_t i = 0; ok && i < final_chunks.size(); ++i) {
        ok = co_await ex.send_chunk(sse_event(final_chunks[i]));
      }
    }
    if (ok) ok = co_await ex.send_chunk("data: [DONE]\n\n");
    if (ok) co_await ex.end_stream();
    break;
  }
}

}  // namespace k25
