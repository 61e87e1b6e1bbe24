// One structured (JSON) log line per HTTP request, written to stderr.
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
  uint64_t request_id = 0;
  int prompt_tokens = -1;
  int completion_tokens = -1;
  std::string finish_reason;
  double ttft_ms = -1;
  std::string sla;
  std::string domain;
  std::string error;

  std::string line() const;  // {"ts": ..., "event": "request", ...} without newline
};

}  // namespace k25
