#include "client/http_call.h"

#include <cstdint>
#include <limits>

#include "core/error.h"

namespace k25::client {

namespace {

using Clock = std::chrono::steady_clock;

auto with_ec(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

}  // namespace

HttpCall::HttpCall(net::any_io_executor executor, Timeouts timeouts)
    : timeouts_(timeouts), stream_(std::move(executor)) {
  // No limit; not boost::none, which Boost 1.74 compares as smaller than any Content-Length.
  parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
}

void HttpCall::arm() {
  auto step = std::chrono::duration_cast<Clock::duration>(timeouts_.step);
  if (timeouts_.whole.count() > 0) step = std::min(step, deadline_ - Clock::now());
  stream_.expires_after(std::max(step, Clock::duration::zero()));
}

bool HttpCall::failed(const beast::error_code& ec, const char* step) {
  if (!ec) return false;
  // beast reports an expired step as "The socket was closed due to a timeout".
  error_ = concat(step, ": ", ec.message());
  return true;
}

net::awaitable<bool> HttpCall::start(const HttpUrl& url, const ClientRequest& request,
                                     const std::vector<tcp::endpoint>* resolved) {
  deadline_ = Clock::now() + timeouts_.whole;
  beast::error_code ec;
  arm();
  if (resolved != nullptr) {
    co_await stream_.async_connect(*resolved, with_ec(ec));
  } else {
    tcp::resolver resolver(stream_.get_executor());
    auto endpoints = co_await resolver.async_resolve(url.host, url.port, with_ec(ec));
    if (!ec) co_await stream_.async_connect(endpoints, with_ec(ec));
  }
  if (failed(ec, "connect")) co_return false;

  http::request<http::string_body> out{request.method, url.target(request.path), 11};
  out.set(http::field::host, url.host_header());
  out.set(http::field::user_agent, "k25");
  for (const auto& [name, value] : request.headers) out.set(name, value);
  out.body() = request.body;
  if (!request.body.empty() || request.method == http::verb::post) out.prepare_payload();
  out.keep_alive(false);
  arm();
  co_await http::async_write(stream_, out, with_ec(ec));
  if (failed(ec, "send")) co_return false;
  arm();
  co_await http::async_read_header(stream_, buffer_, parser_, with_ec(ec));
  co_return !failed(ec, "response");
}

std::optional<std::string> HttpCall::header(std::string_view name) const {
  const auto& response = parser_.get();
  auto it = response.find(beast::string_view(name.data(), name.size()));
  if (it == response.end()) return std::nullopt;
  return std::string(it->value());
}

bool HttpCall::streamed() const {
  return parser_.chunked() ||
         header("content-type").value_or("").rfind("text/event-stream", 0) == 0;
}

net::awaitable<bool> HttpCall::read_some(std::string& out) {
  if (parser_.is_done() || !error_.empty()) co_return false;
  beast::error_code ec;
  arm();
  co_await http::async_read_some(stream_, buffer_, parser_, with_ec(ec));
  std::string& body = parser_.get().body();
  out += body;
  body.clear();
  co_return !failed(ec, "read");
}

net::awaitable<bool> HttpCall::read_rest(std::string& out) {
  for (bool more = true; more;) more = co_await read_some(out);
  co_return error_.empty();
}

void HttpCall::close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

ClientResponse fetch(const HttpUrl& url, const ClientRequest& request, Timeouts timeouts) {
  net::io_context ioc;
  ClientResponse response;
  std::string error;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        HttpCall call(ioc.get_executor(), timeouts);
        if (co_await call.start(url, request) && co_await call.read_rest(response.body)) {
          response.status = call.status();
          response.content_type = call.header("content-type").value_or("");
        }
        error = call.error();
        call.close();
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);  // out of ioc.run()
      });
  ioc.run();
  if (!error.empty()) {
    fail(std::string(http::to_string(request.method)), " http://", url.host_header(),
         url.target(request.path), ": ", error);
  }
  return response;
}

}  // namespace k25::client
