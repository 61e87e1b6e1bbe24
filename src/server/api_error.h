// Errors the HTTP API reports: an HTTP status plus OpenAI's error shape
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace k25 {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;      // the offending field or header; empty → null
  std::string code;       // machine-readable code; empty → null
  int retry_after_s = 0;  // > 0: sent as Retry-After (429, 503)
};

nlohmann::json error_body(const ApiError& error);

// Thrown by request parsing and validation; caught by the router.
class ApiException : public std::runtime_error {
 public:
  explicit ApiException(ApiError error)
      : std::runtime_error(error.message), error_(std::move(error)) {}
  const ApiError& error() const { return error_; }

 private:
  ApiError error_;
};

[[noreturn]] void throw_bad_request(std::string message, std::string param = {},
                                    std::string code = {});

}  // namespace k25
