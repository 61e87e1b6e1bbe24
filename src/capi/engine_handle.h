// C++ entry points beside include/k25.h for programs that hold their own Model (the server's
// in-process tests run it over a fake model): the same k25_engine handle, around a model the
// caller keeps alive until k25_free.
#pragma once

#include <string>

#include "capi/engine_settings.h"
#include "k25.h"
#include "model/model.h"

namespace k25 {

// `setup` as finish_engine_setup left it; `model_path` names the model for Flash's metadata
// ("" = none). Throws k25::Error.
k25_engine* engine_handle_around(Model& model, const EngineSetup& setup,
                                 const std::string& model_path = "");

// The engine behind a handle (tests read its counters).
Engine& engine_behind(k25_engine* handle);

}  // namespace k25
