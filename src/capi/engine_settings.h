// k25_engine_options.settings (include/k25.h): engine settings as "key=value" strings, named and
// valued as in the server's k25_config.yaml (one exception: flash_scheduler.redis_password is the
// secret that the file redis_password_file holds), turned into the engine's and Flash's options.
// The server passes its configuration to the engine this way too, so the two cannot drift apart.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/speculation.h"
#include "flash/flash_planner.h"

namespace k25 {

struct EngineSetup {
  EngineOptions engine;
  FlashOptions flash;
  SpeculativeMode speculative = SpeculativeMode::kOff;  // a request's default
  // Read by finish(): L3 and the shared tier need the model file and several keys together.
  bool l3_enabled = false;
  std::string l3_device;
  double l3_cache_size_gb = 1;
  std::string l3_backend = "disk";
  std::string redis_url;
  std::string redis_password;  // the secret itself (the config file names a file holding it)
};

// Applies one "key=value"; throws k25::Error naming the key for an unknown key or a bad value.
void apply_engine_setting(EngineSetup& setup, std::string_view setting);

// After every setting: checks what spans several keys and derives what depends on the model
// file (the L3 content tag, the shared tier's namespace). Throws k25::Error.
void finish_engine_setup(EngineSetup& setup, const std::string& model_path);

// Every key apply_engine_setting knows, in order (documentation and tests).
std::vector<std::string> engine_setting_keys();

}  // namespace k25
