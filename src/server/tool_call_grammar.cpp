#include "server/tool_call_grammar.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "server/api_error.h"

namespace k25 {

using nlohmann::ordered_json;

namespace {

// `a b c` of the non-empty pieces.
std::string sequence(std::initializer_list<std::string> items) {
  std::string out;
  for (const std::string& item : items) {
    if (item.empty()) continue;
    out += (out.empty() ? "" : " ") + item;
  }
  return out;
}

std::string literal(const std::string& text) {
  return text.empty() ? std::string() : gbnf_literal(text);
}

}  // namespace

std::string tool_call_gbnf(const ToolCallConstraint& c) {
  std::string call, rules;
  for (size_t i = 0; i < c.alternatives.size(); ++i) {
    const ToolCallConstraintPart& part = c.alternatives[i];
    const JsonSchemaRules value = json_schema_rules(part.schema, concat("t", i, "-"));
    call += (i ? " | " : "") + sequence({literal(part.prefix), value.root, literal(part.suffix)});
    rules += value.gbnf;
  }
  const std::string more =
      c.repeat ? "( " + sequence({literal(c.separator), "call"}) + " )*" : std::string();
  return "root ::= " + sequence({literal(c.begin), "call", more, literal(c.end)}) + "\n" +
         "call ::= " + call + "\n" + rules;
}

std::string forced_tool_call_grammar(ToolCallFormat format, const ToolRequest& request,
                                     const ordered_json& tools) {
  // Each allowed tool's schema alone first, so that an error names the tool.
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& function = tools[i]["function"];
    if (request.choice == ToolChoiceMode::Named && function["name"] != request.forced_name)
      continue;
    const auto parameters = function.find("parameters");
    if (parameters == function.end() || parameters->is_null()) continue;
    try {
      json_schema_rules(*parameters, "p-");
    } catch (const Error& e) {
      throw_bad_request(concat("tools[", i, "].function.parameters: ", e.what()), "tools",
                        "invalid_value");
    }
  }
  try {
    std::string gbnf = tool_call_gbnf(tool_call_constraint(format, request, tools));
    compile_gbnf(gbnf);
    return gbnf;
  } catch (const Error& e) {
    // E.g. a recursive schema that can never finish.
    throw_bad_request(concat("tools: the forced tool call cannot be compiled: ", e.what()), "tools",
                      "invalid_value");
  }
}

}  // namespace k25
