#include "server/api.h"

#include <cctype>
#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/auth.h"
#include "server/request_log.h"
#include "server/response_format.h"
#include "server/static_files.h"
#include "server/static_route.h"

namespace k25 {

using nlohmann::json;

namespace {

struct Route {
  const char* path;
  http::verb method;
};

constexpr Route kRoutes[] = {
    {"/health", http::verb::get},
    {"/metrics", http::verb::get},
    {"/v1/models", http::verb::get},
    {"/v1/models/{id}", http::verb::get},
    {"/generate", http::verb::post},
    {"/v1/completions", http::verb::post},
    {"/v1/chat/completions", http::verb::post},
    {"/v1/messages", http::verb::post},
    {"/v1/messages/count_tokens", http::verb::post},
    {"/v1/embeddings", http::verb::post},
    {"/tokenize", http::verb::post},
    {"/detokenize", http::verb::post},
};

constexpr std::string_view kModelPrefix = "/v1/models/";

// Outside the coroutines: GCC 12 cannot keep a range-for over an array in a coroutine frame.
const Route* find_route(const std::string& path) {
  const bool model_id = path.size() > kModelPrefix.size() && path.starts_with(kModelPrefix);
  for (const Route& r : kRoutes) {
    if (path == r.path || (model_id && std::string_view(r.path) == "/v1/models/{id}")) return &r;
  }
  return nullptr;
}

// The Anthropic routes answer errors in Anthropic's shape.
bool anthropic_path(const std::string& path) {
  return path == "/v1/messages" || path.starts_with("/v1/messages/");
}

// %XX escapes decoded (clients encode a model id as one path segment); a malformed escape
// stays as it is.
std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 500:
      return "server_error";
    case 503:
      return "service_unavailable";
    default:
      return "invalid_request_error";
  }
}

ApiError make_error(int status, std::string message, std::string code = {}) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = error_type(status);
  e.code = std::move(code);
  return e;
}

std::string error_json(const ApiError& error, bool anthropic) {
  return json_text(anthropic ? anthropic_error_body(error) : error_body(error));
}

net::awaitable<void> send_error(HttpExchange& ex, const ApiError& error, bool anthropic) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (error.retry_after_s > 0)
    headers.push_back({"Retry-After", std::to_string(error.retry_after_s)});
  if (error.status == 401) headers.push_back({"WWW-Authenticate", "Bearer"});
  co_await ex.send(error.status, "application/json", error_json(error, anthropic), headers);
}

std::string_view view(beast::string_view s) {
  return {s.data(), s.size()};
}

std::string model_name_of(const k25_model_info& model, const std::string& path) {
  if (*model.name != '\0') return model.name;
  return std::filesystem::path(path).stem().string();
}

}  // namespace

Api::Api(ServerConfig config) : config_(std::move(config)), prompt_workers_(config_.io_threads) {
  if (!config_.fallback_url.empty()) {
    upstream_ = client::HttpUrl::parse(config_.fallback_url, "config: fallback.url");
    breaker_ =
        std::make_unique<CircuitBreaker>(config_.fallback_failure_threshold,
                                         std::chrono::seconds(config_.fallback_probe_interval_s));
  }
}

void Api::set_warming_up() {
  warming_up_ = true;
}

void Api::set_warmup_report(const WarmupReport& report) {
  std::lock_guard lock(warmup_mutex_);
  warmup_report_ = report;
}

void Api::set_engine(k25_engine* engine, const Tokenizer& tokenizer) {
  client_ = std::make_unique<EngineClient>(engine, tokenizer);
  const k25_model_info& model = client_->model_info();
  model_name_ = model_name_of(model, config_.model_path);
  defaults_.sampling.temperature = static_cast<float>(config_.temperature);
  defaults_.sampling.top_p = static_cast<float>(config_.top_p);
  defaults_.sampling.top_k = config_.top_k;
  defaults_.sampling.min_p = static_cast<float>(config_.min_p);
  defaults_.sampling.repeat_penalty = static_cast<float>(config_.repeat_penalty);
  defaults_.context_size = client_->context_size();
  defaults_.max_tokens = std::min(config_.max_tokens, client_->context_size());
  defaults_.n_vocab = model.n_vocab;
  // model.chat_template (--chat-template) replaces the model's template, tool-call format included;
  // the format is that of the template requests with tools render with (tool_use when present).
  chat_template_ = std::make_unique<ChatTemplate>(tokenizer, config_.chat_template);
  tool_call_format_ = detect_tool_call_format(chat_template_->tools_source());
  engine_.store(client_.get());
}

void Api::set_draining() {
  draining_ = true;
}

EngineClient& Api::serving_engine() const {
  EngineClient* engine = engine_.load();
  if (draining_) {
    ApiError e = make_error(503, "the server is shutting down", "draining");
    e.retry_after_s = config_.retry_after_s;
    throw ApiException(e);
  }
  if (!engine) {
    ApiError e = warming_up_ ? make_error(503, "the server is warming up", "warming_up")
                             : make_error(503, "the model is still loading", "loading");
    e.retry_after_s = config_.retry_after_s;
    throw ApiException(e);
  }
  return *engine;
}

std::string Api::error_text(int status, const std::string& message) const {
  const char* code = status == 413   ? "request_too_large"
                     : status == 408 ? "request_timeout"
                     : status == 431 ? "headers_too_large"
                     : status == 503 ? "too_many_connections"
                                     : "invalid_http";
  return json_text(error_body(make_error(status, message, code)));
}

net::awaitable<void> Api::handle(HttpExchange& ex) {
  RequestLog log;
  const HttpRequest& req = ex.request();
  log.method = std::string(req.method_string());
  std::string_view target = view(req.target());
  log.path = std::string(target.substr(0, target.find('?')));
  if (draining_) ex.close_after();

  std::optional<ApiError> error;
  try {
    co_await route(ex, log.path, log);
  } catch (const ApiException& e) {
    error = e.error();
  } catch (const std::exception& e) {
    error = make_error(500, std::string("internal error: ") + e.what(), "internal_error");
  }
  if (error) {
    log.error = error->message;
    if (ex.status() == 0) co_await send_error(ex, *error, anthropic_path(log.path));
  }
  log.status = ex.status();
  const Route* known = find_route(log.path);
  metrics_.record_request(known ? known->path : "other", log.status);
  if (config_.log_requests) {
    std::cerr << (config_.log_format == "text" ? log.text_line() : log.line()) + "\n";
  }
}

net::awaitable<void> Api::route(HttpExchange& ex, const std::string& path, RequestLog& log) {
  // The chat page is public: the browser needs it to ask for the key its API calls then carry.
  if (is_static_path(path)) {
    co_await serve_static(ex, path);
    co_return;
  }
  const Route* route = find_route(path);
  if (!route) throw ApiException(make_error(404, "no route " + path, "not_found"));
  if (ex.request().method() != route->method) {
    ApiError e = make_error(405, concat(path, " accepts ", http::to_string(route->method), " only"),
                            "method_not_allowed");
    // A named vector: GCC 12 mishandles initializer-list temporaries inside co_await.
    std::vector<std::pair<std::string, std::string>> allow;
    allow.emplace_back("Allow", std::string(http::to_string(route->method)));
    co_await ex.send(405, "application/json", error_json(e, anthropic_path(path)), allow);
    co_return;
  }
  if (!config_.api_key.empty() && path != "/health") {
    // OpenAI's clients send Authorization: Bearer, Anthropic's x-api-key; either is accepted.
    auto header = [&](std::string_view name) {
      auto it = ex.request().find(beast::string_view(name.data(), name.size()));
      return it == ex.request().end() ? std::string_view() : view(it->value());
    };
    if (!bearer_matches(header("authorization"), config_.api_key) &&
        !key_matches(header("x-api-key"), config_.api_key)) {
      throw ApiException(
          make_error(401, "missing or wrong API key (Authorization: Bearer ... or x-api-key: ...)",
                     "invalid_api_key"));
    }
  }
  if (path == "/health") {
    co_await health(ex);
  } else if (path == "/metrics") {
    EngineClient* engine = engine_.load();
    std::string text =
        metrics_.render(engine ? engine->metrics() : "", engine != nullptr, draining_);
    {
      std::lock_guard lock(warmup_mutex_);
      text += render_ops_metrics(breaker_.get(), fallback_counters_, warmup_report_);
    }
    co_await ex.send(200, "text/plain; version=0.0.4", std::move(text));
  } else if (path == "/v1/models") {
    co_await models(ex);
  } else if (path.starts_with(kModelPrefix)) {
    const std::string id = percent_decoded(std::string_view(path).substr(kModelPrefix.size()));
    co_await model_by_id(ex, id);
  } else if (path == "/v1/messages") {
    co_await generation(ex, ApiFlavor::Messages, log);
  } else if (path == "/v1/messages/count_tokens") {
    co_await count_tokens(ex);
  } else if (path == "/generate") {
    co_await generation(ex, ApiFlavor::Generate, log);
  } else if (path == "/v1/completions") {
    co_await generation(ex, ApiFlavor::Completions, log);
  } else if (path == "/v1/chat/completions") {
    co_await generation(ex, ApiFlavor::Chat, log);
  } else if (path == "/v1/embeddings") {
    co_await embeddings(ex, log);
  } else if (path == "/tokenize") {
    co_await tokenize(ex);
  } else if (path == "/detokenize") {
    co_await detokenize(ex);
  }
}

net::awaitable<void> Api::health(HttpExchange& ex) {
  const bool ready = engine_.load() != nullptr;
  const std::string status = draining_     ? "draining"
                             : ready       ? "ok"
                             : warming_up_ ? "warming up"
                                           : "loading";
  const int code = draining_ || !ready ? 503 : 200;
  json body = {{"status", status}};
  // While the circuit is open the server still answers (through the upstream): still 200.
  if (breaker_) {
    // "consecutive_timeouts" (kept for dashboards) counts engine errors too.
    body["fallback"] = {{"state", circuit_state_name(breaker_->state())},
                        {"consecutive_timeouts", breaker_->consecutive_failures()},
                        {"url", config_.fallback_url}};
  }
  co_await ex.send(code, "application/json", json_text(body));
}

json Api::model_entry(const EngineClient& engine) const {
  const k25_model_info& c = engine.model_info();
  return {{"id", model_name_},
          {"object", "model"},
          {"created", 0},
          {"owned_by", "k25"},
          {"meta",
           {{"n_vocab", c.n_vocab},
            {"n_ctx", engine.context_size()},
            {"n_ctx_train", c.context_length},
            {"n_embd", c.dim},
            {"n_layer", c.n_layers},
            {"chat_template", chat_template_->kind()},
            {"chat_template_tool_use", chat_template_->has_tool_use()},
            {"tool_call_format", tool_call_format_name(tool_call_format_)},
            {"isa", c.isa}}}};
}

net::awaitable<void> Api::models(HttpExchange& ex) {
  EngineClient& engine = serving_engine();
  json body = {{"object", "list"}, {"data", json::array({model_entry(engine)})}};
  co_await ex.send(200, "application/json", json_text(body));
}

net::awaitable<void> Api::model_by_id(HttpExchange& ex, const std::string& id) {
  EngineClient& engine = serving_engine();
  if (id != model_name_) {
    // OpenAI's answer for a model it does not have.
    ApiError e = make_error(
        404, concat("The model '", id, "' does not exist (this server serves '", model_name_, "')"),
        "model_not_found");
    e.type = "invalid_request_error";
    e.param = "model";
    throw ApiException(e);
  }
  co_await ex.send(200, "application/json", json_text(model_entry(engine)));
}

std::vector<TokenId> Api::chat_prompt(const ParsedRequest& parsed, std::string& text) const {
  ChatPrompt chat =
      chat_template_->render(parsed.messages, parsed.tool_specs, parsed.chat_template_kwargs);
  text = std::move(chat.text);
  if (!parsed.assistant_prefill.empty()) {
    // Anthropic's prefill continues the assistant's turn; it is the client's text, so plain.
    text += parsed.assistant_prefill;
    const std::vector<TokenId> prefill =
        engine_.load()->tokenizer().encode(parsed.assistant_prefill, false, false);
    chat.tokens.insert(chat.tokens.end(), prefill.begin(), prefill.end());
  }
  return std::move(chat.tokens);
}

net::awaitable<void> Api::count_tokens(HttpExchange& ex) {
  serving_engine();
  const size_t n_tokens = co_await prompt_workers_.run(ex.request().body().size(), [&] {
    ParsedRequest parsed = parse_count_tokens_body(ex.request().body(), defaults_);
    std::string text;
    return chat_prompt(parsed, text).size();
  });
  json body = {{"input_tokens", n_tokens}};
  co_await ex.send(200, "application/json", json_text(body));
}

net::awaitable<void> Api::tokenize(HttpExchange& ex) {
  EngineClient& engine = serving_engine();
  std::vector<TokenId> ids = co_await prompt_workers_.run(ex.request().body().size(), [&] {
    TokenizeRequest req = parse_tokenize_body(ex.request().body());
    return engine.tokenizer().encode(req.content, req.add_special, true);
  });
  json body = {{"tokens", ids}};
  co_await ex.send(200, "application/json", json_text(body));
}

net::awaitable<void> Api::detokenize(HttpExchange& ex) {
  EngineClient& engine = serving_engine();
  const Tokenizer& tokenizer = engine.tokenizer();
  std::vector<int32_t> ids = parse_detokenize_body(ex.request().body(), tokenizer.n_vocab());
  json body = {{"content", tokenizer.decode(ids, false)}};
  co_await ex.send(200, "application/json", json_text(body));
}

}  // namespace k25
