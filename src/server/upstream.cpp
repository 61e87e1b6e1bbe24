#include "server/upstream.h"

#include "core/error.h"

namespace k25 {

namespace {

// Request headers that travel upstream; the client's Authorization is for k25, not for it.
constexpr const char* kForwardedHeaders[] = {
    "content-type",  "accept",        "x-prompt-length", "x-response-length",
    "x-latency-sla", "x-domain-hint", "x-request-id"};

}  // namespace

UpstreamCall::UpstreamCall(net::any_io_executor executor, std::chrono::seconds timeout)
    : call_(std::move(executor), client::Timeouts{timeout, {}}) {}

net::awaitable<bool> UpstreamCall::start(const client::HttpUrl& url, const HttpRequest& request,
                                         std::string& error) {
  client::ClientRequest out{request.method(), std::string(request.target()), request.body(), {}};
  out.headers.emplace_back("user-agent", "k25-fallback");
  for (const char* name : kForwardedHeaders) {
    auto it = request.find(name);
    if (it != request.end()) out.headers.emplace_back(name, std::string(it->value()));
  }
  if (co_await call_.start(url, out)) co_return true;
  error = concat("fallback ", url.host_header(), ": ", call_.error());
  co_return false;
}

net::awaitable<bool> UpstreamCall::relay(HttpExchange& ex, std::string& error) {
  std::vector<std::pair<std::string, std::string>> headers;
  headers.emplace_back("x-k25-served-by", "fallback");
  const std::string content_type =
      call_.header("content-type").value_or("application/octet-stream");
  if (!call_.streamed()) {
    // A whole answer: read it all, then send it with its own length.
    std::string body;
    if (!co_await call_.read_rest(body)) {
      error = "fallback: response broken off: " + call_.error();
      co_return false;
    }
    co_await ex.send(status(), content_type, std::move(body), headers);
    co_return !ex.failed();
  }
  // A stream: every piece goes out as soon as it arrives.
  bool ok = co_await ex.start_stream(status(), content_type, headers);
  std::string piece;
  for (bool more = ok; more && ok;) {
    more = co_await call_.read_some(piece);
    if (!piece.empty()) ok = co_await ex.send_chunk(piece);
    piece.clear();
  }
  if (!call_.error().empty()) {
    error = "fallback: stream broken off: " + call_.error();
    co_return false;
  }
  if (ok) ok = co_await ex.end_stream();
  if (!ok && error.empty()) error = "fallback: the client went away";
  co_return ok;
}

}  // namespace k25
