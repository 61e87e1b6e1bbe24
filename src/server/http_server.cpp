#include "server/http_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <iostream>
#include <sstream>

#include "core/error.h"

namespace k25 {

namespace {
constexpr uint32_t kHeaderLimitBytes = 16 * 1024;
// After a failed accept the loop waits this long, doubling up to the last, before it tries again.
constexpr std::chrono::milliseconds kFirstAcceptPause{10};
constexpr std::chrono::milliseconds kLastAcceptPause{1000};
// A rejected body is read and dropped up to this much (or 4 bodies of the limit, if more), each
// read within kDrainIdle, the whole within the read timeout.
constexpr int64_t kDrainBytes = int64_t{64} << 20;
constexpr std::chrono::seconds kDrainIdle{2};

auto with_ec(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

bool out_of_descriptors(const beast::error_code& ec) {
  return ec == net::error::no_descriptors ||
         ec == boost::system::errc::too_many_files_open_in_system;
}

void log_accept_error(const beast::error_code& ec) {
  std::cerr << "{\"event\":\"accept_error\",\"message\":\"" << ec.message()
            << "\",\"retry_ms\":" << kFirstAcceptPause.count() << "}\n";
}
}  // namespace

template <class Message>
void HttpExchange::prepare(Message& message, int status, std::string_view content_type) {
  message.result(static_cast<unsigned>(status));
  message.version(request_.version());
  message.set(http::field::server, "k25");
  message.set(http::field::content_type,
              beast::string_view(content_type.data(), content_type.size()));
  message.keep_alive(keep_alive());
  status_ = status;
}

net::awaitable<void> HttpExchange::send(
    int status, std::string_view content_type, std::string body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::response<http::string_body> res;
  prepare(res, status, content_type);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.body() = std::move(body);
  res.prepare_payload();
  beast::error_code ec;
  stream_.expires_after(write_timeout_);
  co_await http::async_write(stream_, res, with_ec(ec));
  if (ec) failed_ = true;
}

net::awaitable<bool> HttpExchange::start_stream(
    int status, std::string_view content_type,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::response<http::empty_body> res;
  prepare(res, status, content_type);
  res.set(http::field::cache_control, "no-cache");
  for (const auto& [name, value] : headers) res.set(name, value);
  res.chunked(true);
  http::response_serializer<http::empty_body> serializer(res);
  beast::error_code ec;
  stream_.expires_after(write_timeout_);
  co_await http::async_write_header(stream_, serializer, with_ec(ec));
  if (ec) failed_ = true;
  co_return !failed_;
}

net::awaitable<bool> HttpExchange::send_chunk(std::string_view data) {
  if (failed_) co_return false;
  if (data.empty()) co_return true;  // an empty chunk would end the body
  beast::error_code ec;
  stream_.expires_after(write_timeout_);
  co_await net::async_write(stream_, http::make_chunk(net::const_buffer(data.data(), data.size())),
                            with_ec(ec));
  if (ec) failed_ = true;
  co_return !failed_;
}

net::awaitable<bool> HttpExchange::end_stream() {
  if (failed_) co_return false;
  beast::error_code ec;
  stream_.expires_after(write_timeout_);
  co_await net::async_write(stream_, http::make_chunk_last(), with_ec(ec));
  if (ec) failed_ = true;
  co_return !failed_;
}

bool HttpExchange::peer_closed() const {
  char byte;
  ssize_t n = ::recv(const_cast<beast::tcp_stream&>(stream_).socket().native_handle(), &byte, 1,
                     MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, HttpErrorBody error_body)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)),
      ioc_(options_.io_threads),
      acceptor_(ioc_) {}

HttpServer::~HttpServer() {
  stop();
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

void HttpServer::start() {
  beast::error_code ec;
  auto address = net::ip::make_address(options_.host, ec);
  if (ec) fail("api_server.host: '", options_.host, "' is not an IP address");
  net::ip::tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on ", options_.host, ":", options_.port, ": ", ec.message());
  port_ = acceptor_.local_endpoint().port();
  // Synchronous accepts (refuse_one_pending) must not block when no connection is pending.
  acceptor_.non_blocking(true, ec);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  http::response<http::string_body> refusal{http::status::service_unavailable, 11};
  refusal.set(http::field::server, "k25");
  refusal.set(http::field::content_type, "application/json");
  refusal.set(http::field::retry_after, std::to_string(options_.retry_after_s));
  refusal.keep_alive(false);
  refusal.body() = error_body_(503, concat("too many connections: this server holds ",
                                           options_.max_connections, " at most"));
  refusal.prepare_payload();
  std::ostringstream refusal_text;
  refusal_text << refusal;
  refusal_ = refusal_text.str();
  work_ = std::make_unique<net::executor_work_guard<net::io_context::executor_type>>(
      ioc_.get_executor());
  net::co_spawn(acceptor_.get_executor(), accept_loop(), net::detached);
  for (int i = 0; i < options_.io_threads; ++i) {
    threads_.emplace_back([this] { ioc_.run(); });
  }
}

void HttpServer::stop_accepting() {
  net::post(acceptor_.get_executor(), [this] {
    beast::error_code ec;
    acceptor_.close(ec);
  });
}

void HttpServer::stop() {
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

net::awaitable<void> HttpServer::accept_loop() {
  net::steady_timer pause_timer(acceptor_.get_executor());
  std::chrono::milliseconds pause{0};
  for (;;) {
    // Each connection gets its own strand: its coroutine and every event posted to it are
    // serialised, whatever thread runs them.
    net::ip::tcp::socket socket(net::make_strand(ioc_));
    beast::error_code ec;
    co_await acceptor_.async_accept(socket, with_ec(ec));
    if (ec) {
      if (!acceptor_.is_open()) co_return;
      // At the descriptor limit the pending connection stays pending: retrying at once would
      // spin. Refuse it with the spare descriptor; when that cannot be done, wait (longer each
      // time) while the connections we have keep being served.
      if (out_of_descriptors(ec) && refuse_one_pending()) continue;
      if (pause.count() == 0) log_accept_error(ec);
      pause = pause.count() == 0 ? kFirstAcceptPause : std::min(2 * pause, kLastAcceptPause);
      pause_timer.expires_after(pause);
      co_await pause_timer.async_wait(with_ec(ec));
      continue;
    }
    pause = std::chrono::milliseconds(0);
    if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (connections_ >= options_.max_connections) {
      refuse(socket);
      continue;
    }
    ++connections_;  // here, not in session(): the next accept must see it
    auto executor = socket.get_executor();
    net::co_spawn(executor, session(std::move(socket)), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "{\"event\":\"connection_error\",\"message\":\"" << ex.what() << "\"}\n";
      }
    });
  }
}

void HttpServer::refuse(net::ip::tcp::socket& socket) const {
  beast::error_code ec;
  socket.non_blocking(true, ec);
  // What already came of the request is read first: closing with bytes unread makes the kernel
  // reset the connection, and the client could lose the answer.
  std::array<char, 16 * 1024> scratch;
  socket.read_some(net::buffer(scratch), ec);
  net::write(socket, net::buffer(refusal_), ec);
  socket.shutdown(net::ip::tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

bool HttpServer::refuse_one_pending() {
  if (spare_fd_ < 0) return false;
  ::close(spare_fd_);
  net::ip::tcp::socket socket(ioc_);
  beast::error_code ec;
  acceptor_.accept(socket, ec);
  if (!ec) refuse(socket);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  return !ec;
}

// Closing while the client is still sending its (rejected) body makes the kernel reset the
// connection, and a client that reads only once it has sent everything (Python's http.client,
// many SDKs) gets a broken pipe instead of the answer. So: stop sending, then read and drop what
// still comes, bounded in bytes and time.
net::awaitable<void> HttpServer::drain_before_close(beast::tcp_stream& stream) {
  beast::error_code ec;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
  std::vector<char> scratch(64 * 1024);
  int64_t budget = std::max(kDrainBytes, 4 * options_.max_body_bytes);
  const auto deadline = std::chrono::steady_clock::now() + options_.read_timeout;
  for (auto now = std::chrono::steady_clock::now(); !ec && budget > 0 && now < deadline;
       now = std::chrono::steady_clock::now()) {
    stream.expires_after(std::min<std::chrono::steady_clock::duration>(kDrainIdle, deadline - now));
    size_t n = co_await stream.async_read_some(net::buffer(scratch), with_ec(ec));
    budget -= static_cast<int64_t>(n);
  }
}

net::awaitable<void> HttpServer::session(net::ip::tcp::socket socket) {
  struct Counter {
    std::atomic<int>& n;
    ~Counter() { --n; }
  } counter{connections_};
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(options_.max_body_bytes));
    parser.header_limit(kHeaderLimitBytes);
    beast::error_code ec;
    stream.expires_after(options_.idle_timeout);
    co_await http::async_read_header(stream, buffer, parser, with_ec(ec));
    if (!ec) {
      stream.expires_after(options_.read_timeout);
      // Clients such as curl wait for this before sending a large body.
      auto expect = parser.get().find(http::field::expect);
      if (expect != parser.get().end() && beast::iequals(expect->value(), "100-continue")) {
        http::response<http::empty_body> go_on{http::status::continue_, 11};
        co_await http::async_write(stream, go_on, with_ec(ec));
      }
    }
    if (!ec) co_await http::async_read(stream, buffer, parser, with_ec(ec));
    if (ec) {
      // A request we cannot read gets one error answer (when the socket still works), then
      // the connection closes: the rest of the byte stream cannot be trusted.
      int status = 0;
      std::string message;
      if (ec == http::error::body_limit) {
        status = 413;
        message = concat("request body larger than ", options_.max_body_bytes, " bytes");
      } else if (ec == http::error::header_limit) {
        status = 431;
        message = "request headers too large";
      } else if (ec == beast::error::timeout && parser.got_some()) {
        status = 408;
        message = "request not received in time";
      } else if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
                 ec != net::error::eof && ec != net::error::connection_reset &&
                 ec != net::error::operation_aborted && parser.got_some()) {
        status = 400;
        message = "malformed HTTP request: " + ec.message();
      }
      if (status != 0) {
        http::response<http::string_body> res{static_cast<http::status>(status), 11};
        res.set(http::field::server, "k25");
        res.set(http::field::content_type, "application/json");
        res.keep_alive(false);
        res.body() = error_body_(status, message);
        res.prepare_payload();
        stream.expires_after(options_.write_timeout);
        co_await http::async_write(stream, res, with_ec(ec));
        if (!ec) co_await drain_before_close(stream);
      }
      break;
    }
    HttpRequest& request = parser.get();
    HttpExchange exchange(stream, request, options_.write_timeout);
    ++in_flight_;
    try {
      co_await handler_(exchange);
    } catch (...) {
      --in_flight_;
      throw;
    }
    --in_flight_;
    if (!exchange.keep_alive()) break;
  }
  beast::error_code ec;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_send, ec);
}

}  // namespace k25
