// The HTTP/1.1 front: an Asio event loop on a few threads, one coroutine per connection (no
// thread per connection), keep-alive, a request body limit (413), read/idle/write timeouts and
// chunked responses for server-sent events. What to answer is the Handler's business.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/asio.h"

namespace k25 {

using HttpRequest = http::request<http::string_body>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see HttpServer::port())
  int64_t max_body_bytes = 1 << 20;
  std::chrono::seconds read_timeout{30};   // a whole request, once its first byte arrived
  std::chrono::seconds idle_timeout{60};   // waiting for the next request on a kept-alive socket
  std::chrono::seconds write_timeout{30};  // one write to the client
  int io_threads = 2;
  // Open connections at most; the ones over it get a quick 503 (with Retry-After) and are
  // closed, so the server keeps file descriptors for the work it has.
  int max_connections = 1024;
  int retry_after_s = 1;
};

// One request and the ways to answer it; the handler uses exactly one of send() or the
// start_stream()/send_chunk()/end_stream() sequence.
class HttpExchange {
 public:
  HttpExchange(beast::tcp_stream& stream, HttpRequest& request, std::chrono::seconds write_timeout)
      : stream_(stream), request_(request), write_timeout_(write_timeout) {}

  const HttpRequest& request() const { return request_; }
  // Writes a complete response. Extra headers as (name, value) pairs.
  net::awaitable<void> send(int status, std::string_view content_type, std::string body,
                            const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Chunked response: headers now, then chunks. Each returns false once the client is gone.
  net::awaitable<bool> start_stream(
      int status, std::string_view content_type,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  net::awaitable<bool> send_chunk(std::string_view data);
  net::awaitable<bool> end_stream();
  // True when the client closed or reset the connection (checked without blocking).
  bool peer_closed() const;
  // Close the connection after this exchange (set while the server drains).
  void close_after() { close_after_ = true; }

  int status() const { return status_; }
  bool failed() const { return failed_; }
  bool keep_alive() const { return !failed_ && !close_after_ && request_.keep_alive(); }

 private:
  template <class Message>
  void prepare(Message& message, int status, std::string_view content_type);

  beast::tcp_stream& stream_;
  HttpRequest& request_;
  std::chrono::seconds write_timeout_;
  int status_ = 0;
  bool failed_ = false;
  bool close_after_ = false;
};

using HttpHandler = std::function<net::awaitable<void>(HttpExchange&)>;
// Answers requests the HTTP layer itself rejects (413, 400 unparsable, 408): status, message.
using HttpErrorBody = std::function<std::string(int status, const std::string& message)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorBody error_body);
  ~HttpServer();

  // Binds and listens (throws k25::Error when it cannot), then runs the event loop threads.
  void start();
  int port() const { return port_; }
  net::io_context& io_context() { return ioc_; }
  // Stops accepting new connections; open ones keep being served.
  void stop_accepting();
  // Requests whose handler is running.
  int n_in_flight() const { return in_flight_; }
  int n_connections() const { return connections_; }
  // Stops the event loop and joins its threads; open connections are dropped.
  void stop();

 private:
  net::awaitable<void> accept_loop();
  net::awaitable<void> session(net::ip::tcp::socket socket);
  net::awaitable<void> drain_before_close(beast::tcp_stream& stream);
  // Answers 503 on a connection it will not serve and closes it, without waiting on it.
  void refuse(net::ip::tcp::socket& socket) const;
  // Out of file descriptors: takes one pending connection with the spare descriptor and
  // refuses it, so clients in the listen queue get an answer rather than a hang. False when
  // none could be taken.
  bool refuse_one_pending();

  HttpServerOptions options_;
  HttpHandler handler_;
  HttpErrorBody error_body_;
  net::io_context ioc_;
  net::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<int> in_flight_{0};
  std::atomic<int> connections_{0};
  std::string refusal_;  // the whole 503 response, built once
  int spare_fd_ = -1;    // /dev/null, held to be given up when accept() runs out of descriptors
  std::vector<std::thread> threads_;
  std::unique_ptr<net::executor_work_guard<net::io_context::executor_type>> work_;
};

}  // namespace k25
