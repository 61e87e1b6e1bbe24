// k25's one HTTP/1.1 client: one request on a fresh connection, with a timeout on every network
// step and optionally on the whole exchange. k25-bench streams completions through it, the
// server relays fallback requests through it, and k25-verify's blocking calls use fetch().
// Runs as a coroutine on the caller's io_context, so many calls can be in flight on one thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/http_url.h"
#include "core/asio.h"

namespace k25::client {

using tcp = net::ip::tcp;

struct Timeouts {
  std::chrono::milliseconds step{30'000};  // each of: resolve + connect, send, each read
  std::chrono::milliseconds whole{0};      // the whole exchange; 0: only the steps are bounded
};

struct ClientRequest {
  http::verb method = http::verb::post;
  std::string path;  // the route; HttpUrl::target() puts the URL's prefix before it
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // content-type, authorization, ...
};

class HttpCall {
 public:
  HttpCall(net::any_io_executor executor, Timeouts timeouts);

  // Connects (to `resolved` when given, else resolving url.host), sends the request and reads the
  // response header. False with error() set ("connect: ...", "send: ...", "response: ...") when
  // the server cannot be reached or answered nothing.
  net::awaitable<bool> start(const HttpUrl& url, const ClientRequest& request,
                             const std::vector<tcp::endpoint>* resolved = nullptr);

  // After start():
  int status() const { return static_cast<int>(parser_.get().result_int()); }
  std::optional<std::string> header(std::string_view name) const;
  // A body that comes in pieces (chunked or server-sent events) rather than as one whole.
  bool streamed() const;
  // Appends the next piece of the body that arrived to `out`. False once the body is complete
  // (done()) or broke off (error() set: "read: ...").
  net::awaitable<bool> read_some(std::string& out);
  // Appends the rest of the body to `out`; false with error() set when it broke off.
  net::awaitable<bool> read_rest(std::string& out);
  bool done() const { return parser_.is_done(); }
  const std::string& error() const { return error_; }

  // Shuts the connection down, so that a pending step ends at once (a bounded run cutting off
  // its streams); safe to call from the executor's thread at any time.
  void close();

 private:
  // Arms the stream's timer for the next step: the step timeout, capped by the whole one.
  void arm();
  bool failed(const beast::error_code& ec, const char* step);

  Timeouts timeouts_;
  std::chrono::steady_clock::time_point deadline_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
  std::string error_;
};

struct ClientResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

// One blocking request (k25-verify): the whole answer, of any status. Throws k25::Error on a
// network failure or a timeout, naming the method and URL.
ClientResponse fetch(const HttpUrl& url, const ClientRequest& request, Timeouts timeouts);

}  // namespace k25::client
