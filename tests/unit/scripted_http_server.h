// A scripted HTTP server for client tests: answers connection i with responses[min(i, last)]
// (raw bytes, status line included), one connection at a time, on 127.0.0.1 and a free port, and
// keeps the requests it read.
#pragma once

#include <atomic>
#include <cctype>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/asio.h"

namespace k25::test_http {

// A chunked 200 answer of server-sent events made of `pieces`.
inline std::string chunked(const std::vector<std::string>& pieces) {
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& p : pieces) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", p.size());
    out += size + p + "\r\n";
  }
  return out + "0\r\n\r\n";
}

// Answers connection i with responses[min(i, last)], one connection at a time; keeps requests.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::string> responses)
      : responses_(std::move(responses)),
        acceptor_(ioc_, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    beast::error_code ec;
    // Wake the blocking accept with a connection of our own.
    net::io_context wake;
    net::ip::tcp::socket s(wake);
    s.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port()), ec);
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  std::vector<std::string> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    for (size_t i = 0;; ++i) {
      net::ip::tcp::socket socket(ioc_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (stop_ || ec) return;
      std::string request;
      char buffer[4096];
      // Headers, then the body by Content-Length.
      size_t header_end = std::string::npos, length = 0;
      while (header_end == std::string::npos || request.size() < header_end + 4 + length) {
        size_t n = socket.read_some(net::buffer(buffer), ec);
        if (ec) break;
        request.append(buffer, n);
        if (header_end == std::string::npos) {
          header_end = request.find("\r\n\r\n");
          if (header_end != std::string::npos) {
            std::string lower = request.substr(0, header_end);
            for (char& c : lower) c = static_cast<char>(std::tolower(c));
            size_t at = lower.find("content-length:");
            if (at != std::string::npos) length = std::stoul(lower.substr(at + 15));
          }
        }
      }
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
      }
      net::write(socket, net::buffer(responses_[std::min(i, responses_.size() - 1)]), ec);
      socket.shutdown(net::ip::tcp::socket::shutdown_both, ec);
    }
  }

  std::vector<std::string> responses_;
  net::io_context ioc_;
  net::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> requests_;
};

}  // namespace k25::test_http
