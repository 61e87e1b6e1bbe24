// The HTTP API: routes (/generate, /v1/completions, /v1/chat/completions, /v1/embeddings,
// /v1/models[/{id}], Anthropic's /v1/messages[/count_tokens], /health, /metrics, /tokenize,
// /detokenize, the chat page at / and /ui/), authentication, errors in OpenAI's shape
// (Anthropic's on its routes), one log line per request, the fallback circuit breaker (R-CFG3).
// Talks to the engine only through include/k25.h (server/engine_client.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/chat_template.h"
#include "server/circuit_breaker.h"
#include "server/config.h"
#include "server/engine_client.h"
#include "server/event_channel.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/ops_metrics.h"
#include "server/prompt_workers.h"
#include "server/request_parsing.h"
#include "server/tool_call_format.h"
#include "server/upstream.h"
#include "server/warmup.h"

namespace k25 {

struct GenerationCall;

struct RequestLog;

class Api {
 public:
  // Throws k25::Error for an invalid fallback.url.
  explicit Api(ServerConfig config);

  // The model is loaded and the warm-up runs: /health says 503 "warming up".
  void set_warming_up();
  // Call before set_engine: exported in /metrics.
  void set_warmup_report(const WarmupReport& report);

  // Once the model is loaded: requests are served from now on. `engine` (the C API's handle) and
  // `tokenizer` (the model's, for the front end) must outlive every request (stop the HTTP
  // server before releasing them).
  void set_engine(k25_engine* engine, const Tokenizer& tokenizer);
  // Shutting down: new generation requests get 503, connections close after their request.
  void set_draining();
  bool draining() const { return draining_; }

  net::awaitable<void> handle(HttpExchange& exchange);
  // Body of errors the HTTP layer produces itself (413, 400, 408, 431).
  std::string error_text(int status, const std::string& message) const;

 private:
  net::awaitable<void> route(HttpExchange& ex, const std::string& path, RequestLog& log);
  // A generation request (api_generation.cpp): prepare (hints, body, prompt, fingerprint and
  // plan) -> route (engine or fallback) -> submit its choices -> wait for the first event
  // (with a fallback) -> answer, whole or streamed.
  net::awaitable<void> generation(HttpExchange& ex, ApiFlavor flavor, RequestLog& log);
  // False when it answered already (a /generate request for a domain without a gate).
  net::awaitable<bool> prepare_generation(GenerationCall& call);
  net::awaitable<void> tokenise_prompt(GenerationCall& call, std::string& chat_text);
  void submit_choices(GenerationCall& call, bool probe);  // throws ApiException when refused
  // True when the request is answered (by the upstream) or its client left; otherwise `first`
  // holds the engine's first event.
  net::awaitable<bool> await_first_event(GenerationCall& call,
                                         std::chrono::steady_clock::time_point submitted_at,
                                         bool probe, std::optional<ChoiceEvent>& first);
  net::awaitable<void> answer(GenerationCall& call, std::optional<ChoiceEvent>& first);
  net::awaitable<void> embeddings(HttpExchange& ex, RequestLog& log);  // api_embeddings.cpp
  // Sends the request to the fallback upstream and its answer to the client; `on_connected`
  // runs once the upstream took it. False when the upstream could not be reached: nothing was
  // sent and the caller must answer.
  net::awaitable<bool> serve_by_fallback(HttpExchange& ex, RequestLog& log,
                                         const std::function<void()>* on_connected = nullptr);
  // After start() succeeded: passes the upstream's answer on and accounts for it.
  net::awaitable<void> relay_fallback(HttpExchange& ex, UpstreamCall& call, RequestLog& log);
  net::awaitable<void> health(HttpExchange& ex);
  net::awaitable<void> models(HttpExchange& ex);
  net::awaitable<void> model_by_id(HttpExchange& ex, const std::string& id);
  nlohmann::json model_entry(const EngineClient& engine) const;  // one entry of /v1/models
  net::awaitable<void> count_tokens(HttpExchange& ex);
  // The prompt of a chat (Chat and Messages, count_tokens too): the rendered conversation
  // (into `text`, which the fingerprint reads), tokenised. Call once the engine is set.
  std::vector<TokenId> chat_prompt(const ParsedRequest& parsed, std::string& text) const;
  net::awaitable<void> tokenize(HttpExchange& ex);
  net::awaitable<void> detokenize(HttpExchange& ex);
  EngineClient& serving_engine() const;  // throws 503 while loading or draining

  ServerConfig config_;
  std::atomic<EngineClient*> engine_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_response_id_{1};
  HttpMetrics metrics_;
  // Fallback (R-CFG3): set when fallback.url is.
  std::unique_ptr<CircuitBreaker> breaker_;
  client::HttpUrl upstream_;
  FallbackCounters fallback_counters_;
  // Warm-up (R-CFG2).
  std::atomic<bool> warming_up_{false};
  mutable std::mutex warmup_mutex_;
  std::optional<WarmupReport> warmup_report_;
  // Set once in set_engine, before engine_ is published.
  std::unique_ptr<EngineClient> client_;
  std::string model_name_;
  RequestDefaults defaults_;
  std::unique_ptr<ChatTemplate> chat_template_;  // the model's template, parsed once
  ToolCallFormat tool_call_format_ = ToolCallFormat::Hermes;
  // Body parsing, chat rendering and tokenisation run here, off the event-loop threads. Last:
  // its threads are joined before the members they use go.
  PromptWorkers prompt_workers_;
};

}  // namespace k25
