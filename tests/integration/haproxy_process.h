// Test helper: a real haproxy in the foreground (`haproxy -db -f deploy/CONFIG`) in front of two
// k25 replicas on 127.0.0.1, its addresses given through the environment the deploy configs
// read (K25_LISTEN, K25_REPLICA_1, K25_REPLICA_2, K25_STATS); killed when the object goes, its
// log kept only when a test failed. A missing haproxy fails the test (system_tools.h).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "system_tools.h"

extern char** environ;

namespace k25::testing {

class HaproxyProcess {
 public:
  // `config`: a file in deploy/ (haproxy.cfg, haproxy-sessions.cfg).
  HaproxyProcess(const std::string& config, int replica1_port, int replica2_port)
      : port_(free_loopback_port()) {
    const std::string binary = tool_path("haproxy");
    const std::string cfg = std::string(K25_SOURCE_DIR) + "/deploy/" + config;
    log_path_ = ::testing::TempDir() + "k25_haproxy_" + std::to_string(getpid()) + "_" +
                std::to_string(port_) + ".log";
    // Everything the child needs is built here: between fork and exec a child of a threaded
    // process may only make async-signal-safe calls (no malloc, so no setenv or fopen).
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    const auto address = [](int port) { return "127.0.0.1:" + std::to_string(port); };
    env.push_back("K25_LISTEN=" + address(port_));
    env.push_back("K25_REPLICA_1=" + address(replica1_port));
    env.push_back("K25_REPLICA_2=" + address(replica2_port));
    env.push_back("K25_STATS=" + address(free_loopback_port()));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string db = "-db", f = "-f";
    std::vector<char*> argv = {const_cast<char*>(binary.c_str()), db.data(), f.data(),
                               const_cast<char*>(cfg.c_str()), nullptr};
    const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot create " + log_path_);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(log_fd, 1);  // the duplicates do not inherit O_CLOEXEC
      dup2(log_fd, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(log_fd);
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }
  ~HaproxyProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    remove_unless_failed(log_path_);
  }
  HaproxyProcess(const HaproxyProcess&) = delete;
  HaproxyProcess& operator=(const HaproxyProcess&) = delete;

  int port() const { return port_; }
  std::string log() const { return read_file(log_path_); }

  // Returns once /health answers 200 through the proxy (its health checks have found a
  // replica up); throws with haproxy's log after `timeout`.
  void wait_ready(std::chrono::seconds timeout = std::chrono::seconds(30)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!health_is_ok(port_)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("haproxy did not answer /health in time; its log:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  int port_;
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace k25::testing
