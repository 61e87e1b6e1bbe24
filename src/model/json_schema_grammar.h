// JSON schema (the subset in docs/constrained-decoding.md) to GBNF, for OpenAI's response_format
// and k25's /generate "json_schema". A keyword k25 cannot enforce is an error naming it and where
// it is ("json schema: at /properties/age: 'minimum' is not supported"), never silently ignored,
// so that every output of a schema request validates.
//
// Composition (for callers that put a schema inside a larger grammar, e.g. a tool call):
//   const JsonSchemaRules args = json_schema_rules(tool.parameters, "call-");
//   const std::string gbnf = "root ::= " + gbnf_literal("<tool_call>\n") + " " + args.root +
//                            " " + gbnf_literal("\n</tool_call>") + "\n" + args.gbnf;
//   std::shared_ptr<const Grammar> grammar = compile_gbnf(gbnf);
// Every rule json_schema_rules defines starts with the prefix, so several schemas (one prefix
// each, e.g. "t0-", "t1-") and the caller's own rules live in one grammar without clashing. The
// root rule matches one JSON value with no whitespace around it; `ws_rule` is the optional
// whitespace the schema's rules use between tokens, for the caller to reuse.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "model/grammar.h"

namespace k25 {

struct JsonSchemaRules {
  std::string root;     // name of the rule matching one value of the schema
  std::string ws_rule;  // name of the whitespace rule (defined in gbnf)
  std::string gbnf;     // rule definitions, one per line, every name starting with the prefix
};

// `schema` keeps its object keys in document order (properties are generated in that order).
// `prefix`: letters, digits, '-' and '_'. Throws k25::Error naming an unsupported construct.
JsonSchemaRules json_schema_rules(const nlohmann::ordered_json& schema, std::string_view prefix);

// A whole grammar: optional leading whitespace, then one value of the schema.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema);

// OpenAI's {"type": "json_object"}: any JSON object.
std::shared_ptr<const Grammar> compile_json_object_grammar();

// A GBNF string literal that matches exactly `text` (valid UTF-8, else k25::Error; quotes,
// backslashes and control characters escaped).
std::string gbnf_literal(std::string_view text);

}  // namespace k25
