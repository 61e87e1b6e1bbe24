#include "server/request_log.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace k25 {

std::string RequestLog::line() const {
  nlohmann::json j;
  char ts[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  j["ts"] = ts;
  j["event"] = "request";
  j["method"] = method;
  j["path"] = path;
  j["status"] = status;
  j["duration_ms"] =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (request_id) j["request_id"] = request_id;
  if (prompt_tokens >= 0) j["prompt_tokens"] = prompt_tokens;
  if (completion_tokens >= 0) j["completion_tokens"] = completion_tokens;
  if (!finish_reason.empty()) j["finish_reason"] = finish_reason;
  if (ttft_ms >= 0) j["ttft_ms"] = ttft_ms;
  if (!sla.empty()) j["sla"] = sla;
  if (!domain.empty()) j["domain"] = domain;
  if (!error.empty()) j["error"] = error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace k25
