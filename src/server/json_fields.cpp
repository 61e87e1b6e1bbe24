#include "server/json_fields.h"

#include <cmath>

#include "core/error.h"
#include "server/api_error.h"

namespace k25 {

using nlohmann::json;

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(const char* name, const char* expected) {
  throw_bad_request(concat("'", name, "' must be ", expected), name, "invalid_type");
}

int64_t get_int(const json& body, const char* name, int64_t fallback, int64_t min, int64_t max) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) wrong_type(name, "an integer");
  // Unsigned values above int64 range are out of range either way.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max), name,
                      "out_of_range");
  }
  int64_t n = v->get<int64_t>();
  if (n < min || n > max) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max, ", got ", n), name,
                      "out_of_range");
  }
  return n;
}

double get_number(const json& body, const char* name, double fallback, double min, double max) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(name, "a number");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max), name,
                      "out_of_range");
  }
  return x;
}

bool get_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(name, "true or false");
  return v->get<bool>();
}

std::string get_string(const json& body, const char* name, std::string fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(name, "a string");
  return v->get<std::string>();
}

}  // namespace k25
