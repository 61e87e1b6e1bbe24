#include "server/api_error.h"

namespace k25 {

nlohmann::json error_body(const ApiError& error) {
  auto nullable = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", nullable(error.param)},
            {"code", nullable(error.code)}}}};
}

void throw_bad_request(std::string message, std::string param, std::string code) {
  ApiError error;
  error.status = 400;
  error.message = std::move(message);
  error.param = std::move(param);
  error.code = std::move(code);
  throw ApiException(std::move(error));
}

}  // namespace k25
