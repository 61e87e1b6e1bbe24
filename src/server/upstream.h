// The fallback upstream (R-CFG3): an OpenAI-compatible server that takes generation requests
// while the circuit is open or when the engine timed out. One UpstreamCall forwards one client
// request (through client::HttpCall) and passes the answer through, whole or streamed
// (server-sent events as they come).
#pragma once

#include <chrono>
#include <string>

#include "client/http_call.h"
#include "server/http_server.h"

namespace k25 {

class UpstreamCall {
 public:
  // `timeout` bounds each network step (connect, write, each read).
  UpstreamCall(net::any_io_executor executor, std::chrono::seconds timeout);

  // Connects, sends the client's request (body, content type and x-* hints) and reads the
  // response header. False (with `error` set) when the upstream cannot be reached or answered
  // nothing: the caller still owns the request and must answer it another way.
  net::awaitable<bool> start(const client::HttpUrl& url, const HttpRequest& request,
                             std::string& error);
  // After start(): passes the upstream's response to the client, header
  // "x-k25-served-by: fallback" added. False when either side broke off midway.
  net::awaitable<bool> relay(HttpExchange& ex, std::string& error);
  int status() const { return call_.status(); }

 private:
  client::HttpCall call_;
};

}  // namespace k25
