// Test helpers: start build/bin/k25-server on 127.0.0.1 with a free port, talk HTTP to it with
// Boost.Beast, stop it with a signal and collect its exit status.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/asio.h"

namespace k25::testing {

using tcp = net::ip::tcp;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Deletes a file a test wrote for its own use (a process's log, a report it parsed) unless a
// test of this run has failed, so that a suite run leaves nothing behind but what a failure is
// read from.
inline void remove_unless_failed(const std::string& path) {
  if (::testing::Test::HasFailure() ||
      ::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
    return;
  }
  std::remove(path.c_str());
}

inline void raise_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// One request on a fresh connection (Connection: close).
inline HttpResult http_call(int port, const std::string& method, const std::string& target,
                            const std::string& body = "",
                            const std::map<std::string, std::string>& headers = {}) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  stream.expires_after(std::chrono::seconds(60));
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::connection, "close");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 26);
  http::read(stream, buffer, parser);
  HttpResult out;
  out.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  out.body = parser.get().body();
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return out;
}

// The value of the series `name` (labels written out in full: `x_total{reason="length"}`) in
// /metrics text; -1 when absent.
inline double metric_in(const std::string& metrics_text, const std::string& name) {
  std::istringstream in(metrics_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

// The same, read from the /metrics of the server on `port`.
inline double metric(int port, const std::string& name) {
  return metric_in(http_call(port, "GET", "/metrics").body, name);
}

// Whether GET /health on 127.0.0.1:port answers 200 now (false while nothing answers there).
inline bool health_is_ok(int port) {
  try {
    return http_call(port, "GET", "/health").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

// The JSON payloads of an SSE body ("data: ..." lines), "[DONE]" included as a string.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
  }
  return out;
}

class ServerProcess {
 public:
  // Starts k25-server with `args` (plus --host 127.0.0.1 --port 0), waits until it listens and,
  // with `wait_ready`, until /health answers 200. Throws on failure. A `launcher` (an absolute
  // path and its arguments, e.g. /usr/bin/unshare ...) runs the server as its last arguments.
  explicit ServerProcess(std::vector<std::string> args, bool wait_ready = true,
                         const std::vector<std::string>& launcher = {}) {
    log_path_ = std::string("/tmp/k25_server_test_") + std::to_string(getpid()) + "_" +
                std::to_string(counter()++) + ".log";
    args.insert(args.begin(), std::string(K25_BIN_DIR) + "/k25-server");
    args.insert(args.begin(), launcher.begin(), launcher.end());
    args.insert(args.end(), {"--host", "127.0.0.1", "--port", "0"});
    // A log left by an earlier run with the same pid would show a stale port.
    std::remove(log_path_.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path_.c_str(), "w");
      dup2(fileno(log), 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    try {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      std::regex port_re("\"event\":\"listening\".*\"port\":([0-9]+)");
      while (port_ == 0) {
        std::smatch m;
        std::string log = read_file(log_path_);
        if (std::regex_search(log, m, port_re)) port_ = std::stoi(m[1]);
        check_alive_until(deadline);
      }
      if (wait_ready) this->wait_ready();
    } catch (...) {
      stop();  // no destructor runs for a constructor that throws; the error carries the log
      throw;
    }
  }
  // Waits (up to a minute) until /health answers 200. Throws when the server exits or never does.
  void wait_ready() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!health_is_ok(port_)) check_alive_until(deadline);
  }
  pid_t pid() const { return pid_; }
  ~ServerProcess() { stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  std::string log() const { return read_file(log_path_); }
  void signal(int sig) { kill(pid_, sig); }
  // Waits (up to `limit`) for the process to exit; its exit code, or -1 (killed/timeout).
  int wait_exit(std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!exit_status_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return *exit_status_;
  }

 private:
  // Kills the server if it still runs and deletes its log (kept after a failed test).
  void stop() {
    if (pid_ > 0 && !exit_status_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    remove_unless_failed(log_path_);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  void check_alive_until(std::chrono::steady_clock::time_point deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      throw std::runtime_error("k25-server exited during start: " + log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("k25-server did not become ready: " + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
  std::optional<int> exit_status_;
};

// Runs a command, returns (exit code, stdout).
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, ""};
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace k25::testing

namespace k25::testing {

// A streaming request read piece by piece, so a test can act in the middle of the stream.
class StreamingCall {
 public:
  StreamingCall(int port, const std::string& target, const std::string& body) : stream_(ioc_) {
    stream_.connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    stream_.expires_after(std::chrono::seconds(120));
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(stream_, req);
    parser_.body_limit(1 << 26);
    http::read_header(stream_, buffer_, parser_);
  }
  int status() { return static_cast<int>(parser_.get().result_int()); }
  // Reads until the body contains `needle` or the response ends; false if it ended first.
  bool read_until(const std::string& needle) {
    while (parser_.get().body().find(needle) == std::string::npos) {
      if (parser_.is_done()) return false;
      beast::error_code ec;
      http::read_some(stream_, buffer_, parser_, ec);
      if (ec) return false;
    }
    return true;
  }
  // Reads to the end of the response; true when it ended cleanly (last chunk received).
  bool read_to_end() {
    while (!parser_.is_done()) {
      beast::error_code ec;
      http::read_some(stream_, buffer_, parser_, ec);
      if (ec) return false;
    }
    return true;
  }
  const std::string& body() { return parser_.get().body(); }
  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

 private:
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace k25::testing
