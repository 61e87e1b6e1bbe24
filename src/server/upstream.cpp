#include "server/upstream.h"

#include <limits>

#include "core/error.h"

namespace k25 {

namespace {

auto with_ec(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

// Request headers that travel upstream; the client's Authorization is for k25, not for it.
constexpr const char* kForwardedHeaders[] = {
    "content-type",  "accept",        "x-prompt-length", "x-response-length",
    "x-latency-sla", "x-domain-hint", "x-request-id"};

}  // namespace

UpstreamUrl parse_upstream_url(const std::string& url, const std::string& what) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) fail(what, ": '", url, "' must start with http://");
  std::string rest = url.substr(scheme.size());
  UpstreamUrl out;
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.prefix = rest.substr(slash);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  } else {
    out.host = authority;
    out.port = "80";
  }
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty()) fail(what, ": '", url, "' has no host");
  if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos) {
    fail(what, ": '", url, "' has an invalid port");
  }
  return out;
}

std::string upstream_target(const UpstreamUrl& url, const std::string& path) {
  const std::string v1 = "/v1";
  const bool prefix_ends_v1 = url.prefix.size() >= v1.size() &&
                              url.prefix.compare(url.prefix.size() - v1.size(), v1.size(), v1) == 0;
  if (prefix_ends_v1 && path.rfind(v1 + "/", 0) == 0) return url.prefix + path.substr(v1.size());
  return url.prefix + path;
}

UpstreamCall::UpstreamCall(net::any_io_executor executor, std::chrono::seconds timeout)
    : timeout_(timeout), stream_(executor) {
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
}

net::awaitable<bool> UpstreamCall::start(const UpstreamUrl& url, const HttpRequest& request,
                                         std::string& error) {
  beast::error_code ec;
  net::ip::tcp::resolver resolver(stream_.get_executor());
  auto endpoints = co_await resolver.async_resolve(url.host, url.port, with_ec(ec));
  if (!ec) {
    stream_.expires_after(timeout_);
    co_await stream_.async_connect(endpoints, with_ec(ec));
  }
  if (ec) {
    error = concat("fallback ", url.host, ":", url.port, ": cannot connect: ", ec.message());
    co_return false;
  }
  std::string path(request.target());
  http::request<http::string_body> out{request.method(), upstream_target(url, path), 11};
  out.set(http::field::host, url.host + ":" + url.port);
  out.set(http::field::user_agent, "k25-fallback");
  for (const char* name : kForwardedHeaders) {
    auto it = request.find(name);
    if (it != request.end()) out.set(name, it->value());
  }
  out.body() = request.body();
  out.prepare_payload();
  out.keep_alive(false);
  stream_.expires_after(timeout_);
  co_await http::async_write(stream_, out, with_ec(ec));
  if (!ec) {
    stream_.expires_after(timeout_);
    co_await http::async_read_header(stream_, buffer_, parser_, with_ec(ec));
  }
  if (ec) {
    error = concat("fallback ", url.host, ":", url.port, ": no answer: ", ec.message());
    co_return false;
  }
  co_return true;
}

net::awaitable<bool> UpstreamCall::relay(HttpExchange& ex, std::string& error) {
  auto& response = parser_.get();
  std::vector<std::pair<std::string, std::string>> headers;
  headers.emplace_back("x-k25-served-by", "fallback");
  auto type_field = response.find(http::field::content_type);
  std::string content_type =
      type_field == response.end() ? "application/octet-stream" : std::string(type_field->value());
  beast::error_code ec;
  if (!parser_.chunked() && content_type.rfind("text/event-stream", 0) != 0) {
    // A whole answer: read it all, then send it with its own length.
    while (!ec && !parser_.is_done()) {
      stream_.expires_after(timeout_);
      co_await http::async_read_some(stream_, buffer_, parser_, with_ec(ec));
    }
    if (ec) {
      error = "fallback: response broken off: " + ec.message();
      co_return false;
    }
    co_await ex.send(status(), content_type, std::move(response.body()), headers);
    co_return !ex.failed();
  }
  // A stream: every piece goes out as soon as it arrives.
  bool ok = co_await ex.start_stream(status(), content_type, headers);
  while (ok && !parser_.is_done()) {
    stream_.expires_after(timeout_);
    co_await http::async_read_some(stream_, buffer_, parser_, with_ec(ec));
    if (ec) {
      error = "fallback: stream broken off: " + ec.message();
      co_return false;
    }
    if (!response.body().empty()) {
      ok = co_await ex.send_chunk(response.body());
      response.body().clear();
    }
  }
  if (ok) ok = co_await ex.end_stream();
  if (!ok && error.empty()) error = "fallback: the client went away";
  co_return ok;
}

}  // namespace k25
