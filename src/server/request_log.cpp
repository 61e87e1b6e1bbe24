#include "server/request_log.h"

#include <ctime>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

namespace k25 {

namespace {

std::string timestamp() {
  char ts[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return ts;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

std::string RequestLog::line() const {
  nlohmann::json j;
  j["ts"] = timestamp();
  j["event"] = "request";
  j["method"] = method;
  j["path"] = path;
  j["status"] = status;
  j["duration_ms"] = elapsed_ms(start);
  if (!id.empty()) j["id"] = id;
  if (request_id) j["request_id"] = request_id;
  if (prompt_tokens >= 0) j["prompt_tokens"] = prompt_tokens;
  if (cached_tokens >= 0) j["cached_tokens"] = cached_tokens;
  if (!session_id.empty()) j["session_id"] = session_id;
  if (completion_tokens >= 0) j["completion_tokens"] = completion_tokens;
  if (!finish_reason.empty()) j["finish_reason"] = finish_reason;
  if (ttft_ms >= 0) j["ttft_ms"] = ttft_ms;
  if (!sla.empty()) j["sla"] = sla;
  if (!domain.empty()) j["domain"] = domain;
  if (flash_level >= 0) j["flash_level"] = flash_level;
  if (!served_by.empty()) j["served_by"] = served_by;
  if (timed_out) j["timed_out"] = true;
  if (!error.empty()) j["error"] = error;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RequestLog::text_line() const {
  std::ostringstream out;
  out << timestamp() << " request " << method << ' ' << path << ' ' << status << ' ' << std::fixed
      << std::setprecision(1) << elapsed_ms(start) << "ms";
  if (!id.empty()) out << " id=" << id;
  if (request_id) out << " request_id=" << request_id;
  if (!sla.empty()) out << " sla=" << sla;
  if (!domain.empty()) out << " domain=" << domain;
  if (flash_level >= 0) out << " flash_level=" << flash_level;
  if (prompt_tokens >= 0) out << " prompt_tokens=" << prompt_tokens;
  if (cached_tokens >= 0) out << " cached_tokens=" << cached_tokens;
  if (!session_id.empty()) out << " session_id=" << std::quoted(session_id);
  if (completion_tokens >= 0) out << " completion_tokens=" << completion_tokens;
  if (!finish_reason.empty()) out << " finish_reason=" << finish_reason;
  if (ttft_ms >= 0) out << " ttft_ms=" << ttft_ms;
  if (!served_by.empty()) out << " served_by=" << served_by;
  if (timed_out) out << " timed_out=true";
  // The error goes last and quoted: it is free text.
  if (!error.empty()) out << " error=" << std::quoted(error);
  return out.str();
}

}  // namespace k25
