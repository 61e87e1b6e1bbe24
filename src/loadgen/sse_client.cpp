#include "loadgen/sse_client.h"

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "loadgen/sse_parser.h"

namespace k25::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::optional<int> parse_retry_after(std::string_view value) {
  int seconds = 0;
  if (value.empty() || value.size() > 6) return std::nullopt;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds;
}

// Keeps a stream registered while it is in flight.
class Registration {
 public:
  Registration(ActiveStreams& active, beast::tcp_stream& stream) : active_(active), s_(&stream) {
    active_.add(s_);
  }
  ~Registration() { active_.remove(s_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  ActiveStreams& active_;
  beast::tcp_stream* s_;
};

}  // namespace

Endpoint Endpoint::parse(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) fail("--url: '", url, "' must start with http://");
  std::string rest = url.substr(scheme.size());
  Endpoint e;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    e.prefix = rest.substr(slash);
    while (!e.prefix.empty() && e.prefix.back() == '/') e.prefix.pop_back();
    // OpenAI clients often take the base URL with /v1; the API paths carry it already.
    if (e.prefix.ends_with("/v1")) e.prefix.resize(e.prefix.size() - 3);
    rest.erase(slash);
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']', colon) == std::string::npos) {
    e.port = rest.substr(colon + 1);
    rest.erase(colon);
  }
  if (!rest.empty() && rest.front() == '[' && rest.back() == ']')
    rest = rest.substr(1, rest.size() - 2);
  e.host = rest;
  if (e.host.empty()) fail("--url: '", url, "' has no host");
  if (e.port.empty() || e.port.find_first_not_of("0123456789") != std::string::npos) {
    fail("--url: '", url, "' has a bad port");
  }
  return e;
}

void ActiveStreams::close_all() {
  for (beast::tcp_stream* s : streams_) {
    beast::error_code ec;
    s->socket().shutdown(tcp::socket::shutdown_both, ec);
    s->close();
  }
}

net::awaitable<StreamResult> stream_post(const std::vector<tcp::endpoint>& endpoints,
                                         const Endpoint& endpoint, const StreamRequest& request,
                                         ActiveStreams& active) {
  StreamResult r;
  beast::error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  beast::tcp_stream stream(co_await net::this_coro::executor);
  Registration registration(active, stream);
  const Clock::time_point t0 = Clock::now();
  // The timeout covers the whole exchange: tcp_stream keeps the expiry until it is reset.
  stream.expires_after(request.timeout);
  auto finish = [&](std::string error) {
    r.error = std::move(error);
    r.end_ms = ms_since(t0);
    return r;
  };
  co_await stream.async_connect(endpoints, token);
  if (ec) co_return finish("connect: " + ec.message());

  http::request<http::string_body> req{http::verb::post, endpoint.prefix + request.target, 11};
  req.set(http::field::host, endpoint.host + ":" + endpoint.port);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : request.headers) req.set(name, value);
  req.body() = request.body;
  req.prepare_payload();
  co_await http::async_write(stream, req, token);
  if (ec) co_return finish("send: " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  // No limit; not boost::none, which Boost 1.74 compares as smaller than any Content-Length.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  co_await http::async_read_header(stream, buffer, parser, token);
  if (ec) co_return finish("response: " + ec.message());
  r.status = static_cast<int>(parser.get().result_int());
  if (auto it = parser.get().find(http::field::retry_after); it != parser.get().end()) {
    r.retry_after_s = parse_retry_after(std::string_view(it->value().data(), it->value().size()));
  }
  if (r.status != 200) {
    co_await http::async_read(stream, buffer, parser, token);
    co_return finish("HTTP " + std::to_string(r.status) + ": " +
                     error_message_of(parser.get().body()));
  }

  SseParser sse;
  std::string error;
  auto handle = [&](const std::string& data) {
    if (r.done || !error.empty()) return;
    CompletionEvent event = interpret_event(data);
    switch (event.kind) {
      case CompletionEvent::Kind::Done:
        r.done = true;
        break;
      case CompletionEvent::Kind::Error:
        error = "stream error: " + event.error;
        break;
      case CompletionEvent::Kind::Chunk:
        if (!event.text.empty()) {
          r.chunk_ms.push_back(ms_since(t0));
          r.text += event.text;
        }
        if (event.prompt_tokens) r.prompt_tokens = event.prompt_tokens;
        if (event.completion_tokens) r.completion_tokens = event.completion_tokens;
        break;
    }
  };
  while (!parser.is_done()) {
    co_await http::async_read_some(stream, buffer, parser, token);
    if (ec) break;
    std::string& body = parser.get().body();
    for (const std::string& data : sse.feed(body)) handle(data);
    body.clear();
  }
  const beast::error_code read_error = ec;
  if (auto last = sse.finish()) handle(*last);
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  if (!error.empty()) co_return finish(error);
  if (!r.done) {
    co_return finish(read_error ? "stream: " + read_error.message()
                                : "stream ended without [DONE]");
  }
  co_return finish("");
}

}  // namespace k25::loadgen
