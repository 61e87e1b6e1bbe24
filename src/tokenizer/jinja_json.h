// JSON in and out of template values: tojson is Python's json.dumps with the arguments
// transformers passes (ensure_ascii, indent, separators, sort_keys), and request/conversation
// JSON becomes values with object key order kept.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/jinja_value.h"

namespace k25::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=...): the per-level indent string
  std::string item_separator = ", ";  // ", " without indent, "," with it (unless given)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...): TypeError for values JSON cannot hold (undefined, generators, callables).
// The text is data when any string inside came from the caller's data.
Text json_dumps(const Value& v, const JsonDumpOptions& options);

// A value from parsed JSON; strings (and keys) are marked as data when `as_data`.
Value value_from_json(const nlohmann::ordered_json& j, bool as_data);

}  // namespace k25::jinja
