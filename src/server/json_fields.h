// Typed access to the fields of a JSON request body, shared by the request parsers of every
// API. A field that is absent or null takes the fallback; a wrong type or an out-of-range value
// is an ApiException (400) naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace k25 {

// Null when absent or null.
const nlohmann::json* field(const nlohmann::json& body, const char* name);
[[noreturn]] void wrong_type(const char* name, const char* expected);
int64_t get_int(const nlohmann::json& body, const char* name, int64_t fallback, int64_t min,
                int64_t max);
double get_number(const nlohmann::json& body, const char* name, double fallback, double min,
                  double max);
bool get_bool(const nlohmann::json& body, const char* name, bool fallback);
std::string get_string(const nlohmann::json& body, const char* name, std::string fallback);

}  // namespace k25
