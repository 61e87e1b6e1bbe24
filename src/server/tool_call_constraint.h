// What a forced tool call (tool_choice "required" or a named function) is constrained to, in
// the model's format, as pieces for the grammar compiler: the output is
//   begin  call (separator call)*  end      (repeat: parallel calls allowed)
//   begin  call  end                       (otherwise)
// where each call is one of `alternatives`: a literal prefix, a JSON value valid against the
// part's schema, a literal suffix. Every output of that grammar parses with parse_tool_calls
// into calls of the allowed tools.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/tool_call_format.h"
#include "server/tool_request.h"

namespace k25 {

struct ToolCallConstraintPart {
  std::string prefix;
  nlohmann::ordered_json schema;  // JSON schema of the value between prefix and suffix
  std::string suffix;
};

struct ToolCallConstraint {
  std::string begin;
  std::vector<ToolCallConstraintPart> alternatives;
  bool repeat = false;
  std::string separator;
  std::string end;
};

// For a request whose `forces_call()`: the tools it allows (all, or the named one) in the
// model's format. `tools`: the request's tools as sent (ParsedRequest::tool_specs), whose key
// order the schemas keep (properties are generated in that order, the call's name before its
// arguments). The XML formats (QwenXml, GlmXml) are constrained to the JSON form their parser
// also reads.
ToolCallConstraint tool_call_constraint(ToolCallFormat format, const ToolRequest& request,
                                        const nlohmann::ordered_json& tools);

}  // namespace k25
