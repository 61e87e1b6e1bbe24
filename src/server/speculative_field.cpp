#include "server/speculative_field.h"

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace k25 {

std::string get_speculative(const nlohmann::json& body) {
  if (!field(body, "speculative")) return "";
  const std::string text = get_string(body, "speculative", "");
  if (text != "off" && text != "ngram" && text != "self" && text != "auto") {
    throw_bad_request(
        concat("speculative: expected \"off\", \"ngram\", \"self\" or \"auto\", got '", text, "'"),
        "speculative", "invalid_value");
  }
  return text;
}

}  // namespace k25
