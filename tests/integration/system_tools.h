// Test helpers shared by the tests that start system programs (redis-server, haproxy): a free
// port on 127.0.0.1 and a program's path. A missing program fails the test: CI installs them
// through scripts/setup.sh, and a test that cannot run must not pass as skipped.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include "server_process.h"

namespace k25::testing {

// A port nothing listens on now (bound, then released): another process may take it before
// the caller binds it.
inline int free_loopback_port() {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

inline std::string tool_path(const char* name) {
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/usr/sbin/", "/usr/local/sbin/"}) {
    const std::string p = std::string(dir) + name;
    if (std::filesystem::exists(p)) return p;
  }
  throw std::runtime_error(std::string(name) +
                           " is not installed: run scripts/setup.sh (apt-get install "
                           "redis-server redis-tools haproxy)");
}

}  // namespace k25::testing
