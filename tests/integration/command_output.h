// Runs a shell command line the way a user's terminal would, keeping its exit code, stdout and
// stderr apart (stderr through a temporary file, so a large stdout cannot block on it).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace k25::testing {

struct CommandOutput {
  int status;  // the exit code; -1 when the command was killed by a signal
  std::string out, err;
};

inline CommandOutput run_capturing(const std::string& command) {
  static std::atomic<int> counter{0};
  const std::filesystem::path err_file =
      std::filesystem::temp_directory_path() /
      ("k25_cmd_err_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  CommandOutput o;
  FILE* pipe = ::popen((command + " 2>" + err_file.string()).c_str(), "r");
  std::array<char, 4096> buf;
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;) {
    o.out.append(buf.data(), n);
  }
  const int status = ::pclose(pipe);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  std::ostringstream s;
  s << in.rdbuf();
  o.err = s.str();
  std::filesystem::remove(err_file);
  return o;
}

}  // namespace k25::testing
