// A request body's "speculative" field (issue 16): "off", "ngram" or "auto"; absent or null: the
// server's default (flash_scheduler.speculative). Anything else is a 400 naming the field;
// "self" (self-speculation from the pruned plan) says it is not implemented yet.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "engine/speculation.h"

namespace k25 {

std::optional<SpeculativeMode> get_speculative(const nlohmann::json& body);

}  // namespace k25
