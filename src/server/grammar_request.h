// The constrained-decoding fields of a request body, compiled: OpenAI's "response_format"
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": ...}}) on the
// completions endpoints, "grammar" (GBNF text) or "json_schema" on /generate. A grammar or
// schema k25 cannot compile is an ApiException (400) whose message names the construct.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "model/grammar.h"
#include "server/request_parsing.h"

namespace k25 {

// Null when the request is unconstrained. `text` is the raw body: schemas are read again from it
// with their keys in document order, the order properties are generated in.
std::shared_ptr<const Grammar> parse_grammar_fields(ApiFlavor flavor, const nlohmann::json& body,
                                                    std::string_view text);

}  // namespace k25
