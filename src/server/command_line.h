// k25-server's command line: --config FILE, then one flag per configuration key (flags win
// over the file), --api-key, --help.
#pragma once

#include <optional>
#include <string>

#include "server/config.h"

namespace k25 {

struct CommandLine {
  ServerConfig config;
  // Set when the program should exit right away (--help: 0 with `output`; bad flags: 2).
  std::optional<int> exit_code;
  std::string output;
};

// Throws k25::Error for invalid config files and values (message names the key).
CommandLine parse_server_command_line(int argc, const char* const* argv);

}  // namespace k25
