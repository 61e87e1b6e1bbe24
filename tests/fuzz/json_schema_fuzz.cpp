// JSON schemas (model/json_schema_grammar.h): any JSON either compiles into a grammar or is a
// k25::Error naming what is unsupported; nothing else may escape, crash or hang. The generated
// GBNF always parses: a schema error is never a grammar syntax error.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "model/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::ordered_json schema;
  try {
    schema =
        nlohmann::ordered_json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const nlohmann::ordered_json::exception&) {
    return 0;
  }
  std::string gbnf;
  try {
    gbnf = k25::json_schema_to_gbnf(schema);
  } catch (const k25::Error& e) {
    if (std::string_view(e.what()).find("json schema") != 0) __builtin_trap();
    return 0;
  }
  try {
    k25::compile_gbnf(gbnf);
  } catch (const k25::Error& e) {
    // Only a schema that can never finish (recursion with no way out) may fail here.
    if (std::string_view(e.what()).find("can never finish") == std::string_view::npos &&
        std::string_view(e.what()).find("left recursion") == std::string_view::npos &&
        std::string_view(e.what()).find("more than") == std::string_view::npos)
      __builtin_trap();
  }
  return 0;
}
