// An engine behind the C API around a model a test holds (capi/engine_handle.h), configured as a
// server with `config` would configure it, to hand to the in-process server
// (Api::set_engine(engine.handle(), engine.tokenizer())).
#pragma once

#include "capi/engine_handle.h"
#include "server/engine_config.h"

namespace k25::testing {

// What k25_load makes of the server's configuration (before the model file is read).
inline EngineSetup engine_setup_of(const ServerConfig& config) {
  EngineSetup setup;
  for (const std::string& setting : engine_settings(config)) apply_engine_setting(setup, setting);
  return setup;
}

class CApiEngine {
 public:
  // `options` replaces the configuration's engine options (tests size the engine themselves);
  // Flash's options and the speculative default come from `config`.
  CApiEngine(Model& model, const EngineOptions& options, const ServerConfig& config = {})
      : model_(model) {
    EngineSetup setup = engine_setup_of(config);
    setup.engine = options;
    handle_ = engine_handle_around(model, setup, config.model_path);
  }
  ~CApiEngine() { k25_free(handle_); }
  CApiEngine(const CApiEngine&) = delete;
  CApiEngine& operator=(const CApiEngine&) = delete;

  k25_engine* handle() const { return handle_; }
  const Tokenizer& tokenizer() const { return model_.tokenizer(); }
  Engine& engine() const { return engine_behind(handle_); }

 private:
  Model& model_;
  k25_engine* handle_ = nullptr;
};

}  // namespace k25::testing
