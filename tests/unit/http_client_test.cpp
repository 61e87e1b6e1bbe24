// k25's one HTTP client (src/client): base URLs as k25-bench, k25-verify and the fallback take
// them, and HttpCall/fetch against a scripted server: whole and streamed bodies, the request
// it sends, and every network step bounded by its timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "client/http_call.h"
#include "core/error.h"
#include "scripted_http_server.h"

namespace k25::client {
namespace {

using test_http::chunked;
using test_http::ScriptedServer;
using namespace std::chrono_literals;

TEST(HttpUrl, ParsesHostPortAndPrefix) {
  HttpUrl u = HttpUrl::parse("http://127.0.0.1:8081/v1/", "url");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "8081");
  EXPECT_EQ(u.prefix, "/v1");
  u = HttpUrl::parse("http://localhost/api/", "url");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.prefix, "/api");
  u = HttpUrl::parse("http://[::1]:9000/x", "url");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, "9000");
  EXPECT_EQ(u.host_header(), "[::1]:9000");
  EXPECT_EQ(HttpUrl::parse("http://[::1]", "url").port, "80");
  EXPECT_EQ(HttpUrl::parse("http://example.com", "url").host_header(), "example.com:80");
}

TEST(HttpUrl, RefusesWhatItCannotReachNamingTheKey) {
  for (const char* bad : {"https://example.com", "example.com:80", "http://:80", "http://host:8x",
                          "http://host:", "http://host:65536", "http://host:123456", ""}) {
    try {
      HttpUrl::parse(bad, "config: fallback.url");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("config: fallback.url"), std::string::npos) << e.what();
    }
  }
}

TEST(HttpUrl, APrefixEndingInV1IsSharedWithV1Paths) {
  const HttpUrl v1 = HttpUrl::parse("http://h:1/v1", "url");
  EXPECT_EQ(v1.target("/v1/completions"), "/v1/completions");
  EXPECT_EQ(v1.target("/generate"), "/v1/generate");
  const HttpUrl proxy = HttpUrl::parse("http://h:1/proxy/v1/", "url");
  EXPECT_EQ(proxy.target("/v1/chat/completions"), "/proxy/v1/chat/completions");
  const HttpUrl root = HttpUrl::parse("http://h:1", "url");
  EXPECT_EQ(root.target("/v1/models"), "/v1/models");
  const HttpUrl v10 = HttpUrl::parse("http://h:1/v10", "url");  // not "/v1"
  EXPECT_EQ(v10.target("/v1/models"), "/v10/v1/models");
}

HttpUrl url_of(int port, const std::string& prefix = "") {
  return HttpUrl::parse("http://127.0.0.1:" + std::to_string(port) + prefix, "url");
}

TEST(HttpCall, FetchReturnsAWholeAnswerOfAnyStatusAndSendsTheRequest) {
  ScriptedServer server(
      {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
       "Content-Length: 11\r\n\r\n{\"e\":\"no\"}\n"});
  ClientRequest request{http::verb::post, "/v1/completions", "{\"a\":1}", {{"x-k", "v"}}};
  ClientResponse res = fetch(url_of(server.port(), "/v1"), request, {5s, {}});
  EXPECT_EQ(res.status, 404);
  EXPECT_EQ(res.content_type, "application/json");
  EXPECT_EQ(res.body, "{\"e\":\"no\"}\n");
  ASSERT_EQ(server.requests().size(), 1u);
  const std::string sent = server.requests()[0];
  EXPECT_EQ(sent.rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u) << sent;
  EXPECT_NE(sent.find("Host: 127.0.0.1:" + std::to_string(server.port())), std::string::npos);
  EXPECT_NE(sent.find("x-k: v\r\n"), std::string::npos);
  EXPECT_NE(sent.find("Content-Length: 7\r\n"), std::string::npos);
  EXPECT_TRUE(sent.ends_with("\r\n\r\n{\"a\":1}")) << sent;
}

TEST(HttpCall, AStreamedBodyComesInPiecesAndEndsDone) {
  ScriptedServer server({chunked({"data: one\n\n", "data: two\n\n"})});
  net::io_context ioc;
  std::string body;
  bool streamed = false, done = false;
  int status = 0;
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        // Named, not temporaries in the co_await: GCC 12 destroys such temporaries twice.
        HttpCall call(ioc.get_executor(), {5s, 10s});
        const HttpUrl url = url_of(server.port());
        const ClientRequest request{http::verb::get, "/s", "", {}};
        if (!co_await call.start(url, request)) {
          ADD_FAILURE() << call.error();
          co_return;
        }
        status = call.status();
        streamed = call.streamed();
        for (bool more = true; more;) more = co_await call.read_some(body);
        done = call.done();
        EXPECT_EQ(call.error(), "");
      },
      net::detached);
  ioc.run();
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(streamed);
  EXPECT_TRUE(done);
  EXPECT_EQ(body, "data: one\n\ndata: two\n\n");
}

// A listening socket that never accepts: the kernel completes the handshake, nobody answers.
class SilentServer {
 public:
  SilentServer() : acceptor_(ioc_, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {}
  int port() const { return acceptor_.local_endpoint().port(); }

 private:
  net::io_context ioc_;
  net::ip::tcp::acceptor acceptor_;
};

TEST(HttpCall, AServerThatNeverAnswersTimesOutAtTheStepBound) {
  SilentServer silent;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    fetch(url_of(silent.port()), {http::verb::get, "/health", "", {}}, {200ms, {}});
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("response: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GET http://127.0.0.1:"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(HttpCall, TheWholeBoundCapsASlowStream) {
  // A stream that sends its header and then nothing for 5 s (or until the client gave up): each
  // read would wait the 10 s step bound, the whole-exchange bound of 300 ms ends it first.
  net::io_context server_ioc;
  net::ip::tcp::acceptor acceptor(server_ioc,
                                  net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  const int port = acceptor.local_endpoint().port();
  std::atomic<bool> client_done{false};
  std::thread server([&] {
    net::ip::tcp::socket socket(server_ioc);
    acceptor.accept(socket);
    char buffer[4096];
    socket.read_some(net::buffer(buffer));
    const std::string head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    net::write(socket, net::buffer(head));
    for (int i = 0; i < 500 && !client_done; ++i) std::this_thread::sleep_for(10ms);
  });
  net::io_context ioc;
  std::string error;
  const auto t0 = std::chrono::steady_clock::now();
  net::co_spawn(
      ioc,
      [&]() -> net::awaitable<void> {
        HttpCall call(ioc.get_executor(), {10s, 300ms});
        const HttpUrl url = url_of(port);
        const ClientRequest request{http::verb::get, "/s", "", {}};
        std::string body;
        if (co_await call.start(url, request)) {
          for (bool more = true; more;) more = co_await call.read_some(body);
        }
        error = call.error();
      },
      net::detached);
  ioc.run();
  const auto waited = std::chrono::steady_clock::now() - t0;
  client_done = true;
  server.join();
  EXPECT_EQ(error.rfind("read: ", 0), 0u) << error;
  EXPECT_LT(waited, 5s);  // the server's silence ends at 5 s; a 10 s step bound never fires
}

TEST(HttpCall, ARefusedConnectionIsAConnectError) {
  int port = 0;
  {
    SilentServer closed;  // a port that was free a moment ago and is closed now
    port = closed.port();
  }
  try {
    fetch(url_of(port), {http::verb::get, "/", "", {}}, {2s, {}});
    ADD_FAILURE() << "connected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": connect: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace k25::client
