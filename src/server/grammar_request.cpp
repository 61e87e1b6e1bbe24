#include "server/grammar_request.h"

#include "core/error.h"
#include "model/json_schema_grammar.h"
#include "server/api_error.h"

namespace k25 {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// The GBNF text `make_gbnf` gives, compiled once here so that a grammar k25 cannot run is the
// client's 400 naming `param` (the engine compiles it again when the request arrives there).
template <typename MakeGbnf>
std::string checked(const char* param, MakeGbnf make_gbnf) {
  try {
    std::string gbnf = make_gbnf();
    compile_gbnf(gbnf);
    return gbnf;
  } catch (const Error& e) {
    throw_bad_request(concat(param, ": ", e.what()), param, "invalid_value");
  }
}

// A schema's GBNF, with compile_json_schema's message for a schema that cannot finish.
std::string schema_gbnf(const ordered_json& schema) {
  std::string gbnf = json_schema_to_gbnf(schema);
  try {
    compile_gbnf(gbnf);
  } catch (const Error& e) {
    fail("json schema: cannot be compiled: ", e.what());
  }
  return gbnf;
}

const ordered_json& ordered_member(const ordered_json& object, const char* name) {
  return object.at(name);
}

}  // namespace

std::string parse_grammar_fields(ApiFlavor flavor, const json& body, std::string_view text) {
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
      return checked("grammar", [&] { return gbnf; });
    }
    if (present("json_schema")) {
      const ordered_json schema = ordered_member(ordered_json::parse(text), "json_schema");
      return checked("json_schema", [&] { return schema_gbnf(schema); });
    }
    return "";
  }

  if (!present("response_format")) return "";
  const json& format = body["response_format"];
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    throw_bad_request("'response_format' must be an object with a string 'type'", "response_format",
                      "invalid_type");
  }
  const std::string type = format["type"];
  if (type == "text") return "";
  if (type == "json_object") {
    static const std::string any_object = json_schema_to_gbnf(ordered_json{{"type", "object"}});
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
  return checked("response_format", [&] { return schema_gbnf(schema); });
}

}  // namespace k25
