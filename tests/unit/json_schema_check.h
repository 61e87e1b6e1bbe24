// A JSON-schema validator for the subset k25 compiles (json_schema_grammar.h), for tests:
// constrained outputs must validate against the schema they were generated for.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace k25::testing {

using nlohmann::ordered_json;

inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool has_type(const ordered_json& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  return false;
}

// "" when `value` satisfies `schema` (whose $refs resolve in `root`), else the first violation.
inline std::string schema_violation(const ordered_json& value, const ordered_json& schema,
                                    const ordered_json& root) {
  if (schema.is_boolean()) return schema.get<bool>() ? "" : "schema false";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    const ordered_json& target =
        ref == "#" ? root : root.at(ordered_json::json_pointer(ref.substr(1)));
    return schema_violation(value, target, root);
  }
  if (schema.contains("const") && value != schema["const"]) return "const";
  if (schema.contains("enum")) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found) return "enum";
  }
  if (schema.contains("anyOf") || schema.contains("oneOf")) {
    const bool one = schema.contains("oneOf");
    int matches = 0;
    for (const auto& s : schema[one ? "oneOf" : "anyOf"])
      matches += schema_violation(value, s, root).empty();
    if (one ? matches != 1 : matches == 0) return one ? "oneOf" : "anyOf";
  }
  if (schema.contains("allOf"))
    for (const auto& s : schema["allOf"])
      if (auto why = schema_violation(value, s, root); !why.empty()) return "allOf: " + why;
  if (schema.contains("type")) {
    const ordered_json& t = schema["type"];
    bool ok = false;
    if (t.is_string()) {
      ok = has_type(value, t);
    } else {
      for (const auto& each : t) ok = ok || has_type(value, each);
    }
    if (!ok) return "type " + t.dump() + " for " + value.dump();
  }
  if (value.is_string()) {
    const std::string s = value;
    if (schema.contains("minLength") && code_points(s) < schema["minLength"].get<size_t>())
      return "minLength";
    if (schema.contains("maxLength") && code_points(s) > schema["maxLength"].get<size_t>())
      return "maxLength";
    if (schema.contains("format")) {
      static const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
      static const std::string time =
          "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
          ")";
      const std::string f = schema["format"];
      const std::string pattern = f == "date"   ? date
                                  : f == "time" ? time
                                  : f == "uuid"
                                      ? "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
                                      : date + "T" + time;
      if (!std::regex_match(s, std::regex(pattern))) return "format " + f + ": " + s;
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      return "minItems";
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      return "maxItems";
    if (schema.contains("items"))
      for (const auto& item : value)
        if (auto why = schema_violation(item, schema["items"], root); !why.empty())
          return "items: " + why;
  }
  if (value.is_object()) {
    if (schema.contains("required"))
      for (const auto& name : schema["required"])
        if (!value.contains(name.get<std::string>())) return "required " + name.dump();
    const ordered_json properties = schema.value("properties", ordered_json::object());
    for (const auto& [key, member] : value.items()) {
      if (properties.contains(key)) {
        if (auto why = schema_violation(member, properties[key], root); !why.empty())
          return "property " + key + ": " + why;
      } else if (schema.contains("additionalProperties")) {
        if (auto why = schema_violation(member, schema["additionalProperties"], root); !why.empty())
          return "additional property " + key + ": " + why;
      }
    }
  }
  return "";
}

inline std::string schema_violation(const ordered_json& value, const ordered_json& schema) {
  return schema_violation(value, schema, schema);
}

}  // namespace k25::testing
