// A request body's "speculative" field (issue 16): "off", "ngram", "self" or "auto"; absent or
// null: "" (the engine's default, flash_scheduler.speculative). Anything else is a 400 naming the
// field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace k25 {

std::string get_speculative(const nlohmann::json& body);

}  // namespace k25
