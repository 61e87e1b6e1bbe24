// The HTTP API served in-process on 127.0.0.1 (a free port, one I/O thread), for unit tests that
// drive it over real HTTP with a model they control.
#pragma once

#include <memory>
#include <string>

#include "server/api.h"
#include "server/http_server.h"

namespace k25::testing {

// Declare it before the Engine it serves: a request's event channel lives on this server's
// io_context, so the engine (and any finished request it has not released yet) must go first.
class InProcessServer {
 public:
  explicit InProcessServer(const ServerConfig& config = ServerConfig()) : api_(config) {
    HttpServerOptions options;
    options.port = 0;
    options.io_threads = 1;
    server_ = std::make_unique<HttpServer>(
        options, [this](HttpExchange& ex) { return api_.handle(ex); },
        [this](int status, const std::string& m) { return api_.error_text(status, m); });
    server_->start();
  }
  ~InProcessServer() { server_->stop(); }
  Api& api() { return api_; }
  int port() const { return server_->port(); }

 private:
  Api api_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace k25::testing
