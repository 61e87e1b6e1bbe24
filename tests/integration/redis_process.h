// Test helper: a real redis-server on 127.0.0.1 (a free port, no persistence, its own temp
// directory), started by the test and killed when it ends; a Redis Cluster of several of them.
// A missing redis-server or redis-cli fails the test (scripts/setup.sh installs them).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "system_tools.h"

namespace k25::testing {

class RedisProcess {
 public:
  // `cli_auth`: the redis-cli flags that authenticate (e.g. "-a PASSWORD --no-auth-warning")
  // when `extra` makes the node require it; cli() uses them.
  explicit RedisProcess(std::vector<std::string> extra = {}, std::string cli_auth = "")
      : cli_auth_(std::move(cli_auth)) {
    char pattern[] = "/tmp/k25-redis-XXXXXX";
    if (!mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    cli_ = tool_path("redis-cli");
    // redis-server cannot bind port 0 and report the port, so a free one is picked first;
    // another process may take it before redis binds it (redis then exits): pick another.
    for (int attempt = 0; !start(extra); ++attempt) {
      if (attempt == 4) {
        throw std::runtime_error("redis-server did not start: " + read_file(dir_ + "/redis.log"));
      }
    }
  }
  ~RedisProcess() {
    kill_now();
    std::filesystem::remove_all(dir_);
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  // redis-cli against this node (arguments as a shell string); its stdout.
  std::string cli(const std::string& args) const { return cli_as(cli_auth_, args); }
  // redis-cli with other credentials ("" for none).
  std::string cli_as(const std::string& auth, const std::string& args) const {
    return run_command(cli_ + " -p " + std::to_string(port_) + " " + auth + " " + args + " 2>&1")
        .second;
  }
  void kill_now() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  const std::string& cli_path() const { return cli_; }

 private:
  // Starts redis-server on a free port; false when it exited (its port was taken meanwhile).
  bool start(const std::vector<std::string>& extra) {
    port_ = free_loopback_port();
    const std::string port = std::to_string(port_), log = dir_ + "/redis.log";
    std::vector<std::string> args = {tool_path("redis-server"), "--port", port, "--bind",
                                     "127.0.0.1"};
    args.insert(args.end(), {"--save", "", "--appendonly", "no", "--dir", dir_, "--logfile", log});
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    // Ours answers with its own directory (not another test's redis that holds the port).
    while (cli("CONFIG GET dir").find(dir_) == std::string::npos) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("redis-server did not answer: " + read_file(dir_ + "/redis.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_, cli_, cli_auth_;
};

// `n` masters, every slot assigned (redis-cli --cluster create), no replicas.
class RedisCluster {
 public:
  explicit RedisCluster(int n) {
    std::string nodes;
    for (int i = 0; i < n; ++i) {
      nodes_.push_back(std::make_unique<RedisProcess>(
          std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file",
                                   "nodes.conf", "--cluster-node-timeout", "2000"}));
      nodes += " " + nodes_.back()->endpoint();
    }
    const auto [code, out] = run_command(nodes_[0]->cli_path() + " --cluster create" + nodes +
                                         " --cluster-replicas 0 --cluster-yes 2>&1");
    if (code != 0) throw std::runtime_error("redis-cli --cluster create failed: " + out);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (const auto& node : nodes_) {
      while (node->cli("CLUSTER INFO").find("cluster_state:ok") == std::string::npos) {
        if (std::chrono::steady_clock::now() > deadline) {
          throw std::runtime_error("the cluster never became ok: " + node->cli("CLUSTER INFO"));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  std::string url() const {
    std::string u;
    for (const auto& node : nodes_) u += (u.empty() ? "redis://" : ",") + node->endpoint();
    return u;
  }
  const std::vector<std::unique_ptr<RedisProcess>>& nodes() const { return nodes_; }

 private:
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace k25::testing
