// The grammar a forced tool call (tool_choice "required" or a named function) is decoded under:
// the pieces of tool_call_constraint as GBNF, literals exactly and each part's value through
// json_schema_rules, so that every output parses with parse_tool_calls into calls of the allowed
// tools, with arguments valid against their schemas.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/grammar.h"
#include "server/tool_call_constraint.h"

namespace k25 {

// The GBNF text (start rule `root`). Throws k25::Error for a schema json_schema_rules refuses.
std::string tool_call_gbnf(const ToolCallConstraint& constraint);

// For a request whose forces_call(): the grammar's GBNF text, checked by compiling it. `tools`:
// the request's tools as sent (ParsedRequest::tool_specs). A tool's parameters schema k25 cannot
// enforce is an ApiException (400) naming the tool and the construct.
std::string forced_tool_call_grammar(ToolCallFormat format, const ToolRequest& request,
                                     const nlohmann::ordered_json& tools);

}  // namespace k25
