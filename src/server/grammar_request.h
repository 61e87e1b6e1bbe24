// The constrained-decoding fields of a request body, as the GBNF text the engine compiles: OpenAI's
// "response_format"
// ({"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": ...}}) on the
// completions endpoints, "grammar" (GBNF text) or "json_schema" on /generate. A grammar or
// schema k25 cannot compile is an ApiException (400) whose message names the construct (it is
// compiled here once to find out).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "model/grammar.h"
#include "server/request_parsing.h"

namespace k25 {

// "" when the request is unconstrained. `text` is the raw body: schemas are read again from it
// with their keys in document order, the order properties are generated in.
std::string parse_grammar_fields(ApiFlavor flavor, const nlohmann::json& body,
                                 std::string_view text);

}  // namespace k25
