// One log line per HTTP request, written to stderr: a JSON object (api_server.log_format json,
// the default) or a key=value text line (text).
#pragma once

#include <chrono>
#include <string>

namespace k25 {

struct RequestLog {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::string method;
  std::string path;
  int status = 0;
  // Generation requests only.
  std::string id;           // the response id ("cmpl-7"), also for requests served upstream
  uint64_t request_id = 0;  // the engine's id, when the engine took the request
  int prompt_tokens = -1;
  int cached_tokens = -1;  // prompt tokens reused from the KV prefix cache
  std::string session_id;  // R-KV4, "" = none
  int completion_tokens = -1;
  std::string finish_reason;
  double ttft_ms = -1;
  std::string sla;
  std::string domain;
  int flash_level = -1;    // the plan: Flash pruning level (0 = the full model)
  std::string served_by;   // "engine" or "fallback"
  bool timed_out = false;  // the engine missed fallback.timeout_ms for the first token
  std::string error;

  std::string line() const;       // {"ts": ..., "event": "request", ...} without newline
  std::string text_line() const;  // "<ts> request POST /v1/completions 200 12.3ms key=value ..."
};

}  // namespace k25
