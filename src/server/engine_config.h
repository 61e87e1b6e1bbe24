// The server's configuration as the engine's settings (k25_engine_options.settings, include/k25.h):
// the engine-side keys of k25_config.yaml as "key=value", and what they set up.
#pragma once

#include <string>
#include <vector>

#include "capi/engine_settings.h"
#include "server/config.h"

namespace k25 {

std::vector<std::string> engine_settings(const ServerConfig& config);

// engine_settings(config) applied (finish_engine_setup, which reads the model file, is the
// caller's when it starts an engine).
EngineSetup engine_setup(const ServerConfig& config);

}  // namespace k25
