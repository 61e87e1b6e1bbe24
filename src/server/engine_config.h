// The server's configuration as the engine's settings (k25_engine_options.settings, include/k25.h):
// the engine-side keys of k25_config.yaml as "key=value".
#pragma once

#include <string>
#include <vector>

#include "server/config.h"

namespace k25 {

std::vector<std::string> engine_settings(const ServerConfig& config);

}  // namespace k25
