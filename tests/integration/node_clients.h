// Test helpers: run one of the real-client scripts of tests/integration/clients/ (an npm project
// whose packages scripts/setup.sh installs from package-lock.json) with Node.js.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "server_process.h"

namespace k25::testing {

inline std::string clients_dir() {
  return std::string(K25_SOURCE_DIR) + "/tests/integration/clients";
}

// Empty when node and the npm package `package` are there, else what is missing. The tests
// FAIL with this message (scripts/setup.sh installs both).
inline std::string missing_node_package(const std::string& package) {
  if (run_command("node --version 2>/dev/null").first != 0) {
    return "node is not installed (run scripts/setup.sh)";
  }
  if (!std::filesystem::exists(clients_dir() + "/node_modules/" + package + "/package.json")) {
    return clients_dir() + "/node_modules/" + package +
           " is missing (run scripts/setup.sh, or `npm ci` in " + clients_dir() + ")";
  }
  return "";
}

// Runs `node clients/<script> <args>`; exit code and output (stdout and stderr).
inline std::pair<int, std::string> run_client(const std::string& script, const std::string& args) {
  return run_command("node " + clients_dir() + "/" + script + " " + args + " 2>&1");
}

// The checks every client test makes: the script exists, ran to the end and said so.
#define EXPECT_CLIENT_PASSES(script, args)                              \
  do {                                                                  \
    auto [rc, out] = ::k25::testing::run_client(script, args);          \
    EXPECT_EQ(rc, 0) << out;                                            \
    EXPECT_NE(out.find("all checks passed"), std::string::npos) << out; \
  } while (0)

}  // namespace k25::testing
