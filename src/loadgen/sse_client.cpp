#include "loadgen/sse_client.h"

#include "core/clock.h"
#include "loadgen/sse_parser.h"

namespace k25::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

std::optional<int> parse_retry_after(std::string_view value) {
  int seconds = 0;
  if (value.empty() || value.size() > 6) return std::nullopt;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return seconds;
}

// Keeps a call registered while it is in flight.
class Registration {
 public:
  Registration(ActiveStreams& active, client::HttpCall& call) : active_(active), call_(&call) {
    active_.add(call_);
  }
  ~Registration() { active_.remove(call_); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  ActiveStreams& active_;
  client::HttpCall* call_;
};

}  // namespace

void ActiveStreams::close_all() {
  for (client::HttpCall* call : calls_) call->close();
}

net::awaitable<StreamResult> stream_post(const std::vector<tcp::endpoint>& endpoints,
                                         const HttpUrl& url, const StreamRequest& request,
                                         ActiveStreams& active) {
  StreamResult r;
  // The timeout covers the whole exchange.
  client::HttpCall call(co_await net::this_coro::executor, {request.timeout, request.timeout});
  Registration registration(active, call);
  const Clock::time_point t0 = Clock::now();
  auto finish = [&](std::string error) {
    r.error = std::move(error);
    r.end_ms = ms_since(t0);
    return r;
  };
  client::ClientRequest out{
      http::verb::post,
      request.target,
      request.body,
      {{"content-type", "application/json"}, {"accept", "text/event-stream"}}};
  for (const auto& header : request.headers) out.headers.push_back(header);
  if (!co_await call.start(url, out, &endpoints)) co_return finish(call.error());
  r.status = call.status();
  if (auto retry_after = call.header("retry-after"))
    r.retry_after_s = parse_retry_after(*retry_after);
  if (r.status != 200) {
    std::string body;
    co_await call.read_rest(body);
    co_return finish("HTTP " + std::to_string(r.status) + ": " + error_message_of(body));
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
  std::string piece;
  for (bool more = true; more;) {
    more = co_await call.read_some(piece);
    for (const std::string& data : sse.feed(piece)) handle(data);
    piece.clear();
  }
  if (auto last = sse.finish()) handle(*last);
  call.close();
  if (!error.empty()) co_return finish(error);
  if (!r.done) {
    co_return finish(!call.error().empty() ? "stream: " + call.error()
                                           : "stream ended without [DONE]");
  }
  co_return finish("");
}

}  // namespace k25::loadgen
