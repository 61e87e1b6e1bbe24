#include "server/grammar_request.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "server/api_error.h"

namespace k25 {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

template <typename Compile>
std::shared_ptr<const Grammar> compiled(const char* param, Compile compile) {
  try {
    return compile();
  } catch (const Error& e) {
    throw_bad_request(concat(param, ": ", e.what()), param, "invalid_value");
  }
}

const ordered_json& ordered_member(const ordered_json& object, const char* name) {
  return object.at(name);
}

}  // namespace

std::shared_ptr<const Grammar> parse_grammar_fields(ApiFlavor flavor, const json& body,
                                                    std::string_view text) {
  const auto present = [&](const char* name) {
    auto it = body.find(name);
    return it != body.end() && !it->is_null();
  };
  if (flavor == ApiFlavor::Generate) {
    if (present("grammar") && present("json_schema")) {
      throw_bad_request("give 'grammar' or 'json_schema', not both", "grammar", "invalid_value");
    }
    if (present("grammar")) {
      if (!body["grammar"].is_string())
        throw_bad_request("'grammar' must be a string (GBNF)", "grammar", "invalid_type");
      const std::string gbnf = body["grammar"];
      return compiled("grammar", [&] { return compile_gbnf(gbnf); });
    }
    if (present("json_schema")) {
      const ordered_json schema = ordered_member(ordered_json::parse(text), "json_schema");
      return compiled("json_schema", [&] { return compile_json_schema(schema); });
    }
    return nullptr;
  }

  if (!present("response_format")) return nullptr;
  const json& format = body["response_format"];
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    throw_bad_request("'response_format' must be an object with a string 'type'", "response_format",
                      "invalid_type");
  }
  const std::string type = format["type"];
  if (type == "text") return nullptr;
  if (type == "json_object") {
    static const std::shared_ptr<const Grammar> any_object = compile_json_object_grammar();
    return any_object;
  }
  if (type != "json_schema") {
    throw_bad_request(concat("response_format: unknown type '", type,
                             "' (text, json_object and json_schema are supported)"),
                      "response_format", "invalid_value");
  }
  const auto spec = format.find("json_schema");
  if (spec == format.end() || !spec->is_object() || !spec->contains("schema")) {
    throw_bad_request("response_format: 'json_schema' must be an object with a 'schema'",
                      "response_format", "invalid_value");
  }
  if (spec->contains("strict") && !(*spec)["strict"].is_boolean() && !(*spec)["strict"].is_null())
    throw_bad_request("response_format: 'strict' must be true or false", "response_format",
                      "invalid_type");
  const ordered_json schema = ordered_member(
      ordered_member(ordered_member(ordered_json::parse(text), "response_format"), "json_schema"),
      "schema");
  return compiled("response_format", [&] { return compile_json_schema(schema); });
}

}  // namespace k25
