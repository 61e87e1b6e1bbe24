// The fallback upstream (R-CFG3): an OpenAI-compatible server that takes generation requests
// while the circuit is open or when the engine timed out. One UpstreamCall forwards one client
// request and passes the answer through, whole or streamed (server-sent events as they come).
#pragma once

#include <chrono>
#include <string>

#include "server/http_server.h"

namespace k25 {

struct UpstreamUrl {
  std::string host;
  std::string port;    // "80" when the URL has none
  std::string prefix;  // path before the route, without a trailing '/', e.g. "" or "/v1"
};

// "http://host[:port][/prefix]"; throws k25::Error naming `what` (the key or flag) otherwise.
UpstreamUrl parse_upstream_url(const std::string& url,
                               const std::string& what = "config: fallback.url");
// The upstream target for a client path: prefix + path, where a prefix ending in "/v1" and a
// path starting with "/v1/" share that part (base URLs are usually given as ".../v1").
std::string upstream_target(const UpstreamUrl& url, const std::string& path);

class UpstreamCall {
 public:
  // `timeout` bounds each network operation (connect, write, each read).
  UpstreamCall(net::any_io_executor executor, std::chrono::seconds timeout);

  // Connects, sends the client's request (body, content type and x-* hints) and reads the
  // response header. False (with `error` set) when the upstream cannot be reached or answered
  // nothing: the caller still owns the request and must answer it another way.
  net::awaitable<bool> start(const UpstreamUrl& url, const HttpRequest& request,
                             std::string& error);
  // After start(): passes the upstream's response to the client, header
  // "x-k25-served-by: fallback" added. False when either side broke off midway.
  net::awaitable<bool> relay(HttpExchange& ex, std::string& error);
  int status() const { return static_cast<int>(parser_.get().result_int()); }

 private:
  std::chrono::seconds timeout_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace k25
