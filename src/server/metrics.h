// /metrics in the Prometheus text format (version 0.0.4): HTTP request counts kept here, then the
// engine's counters and histograms (k25_metrics).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace k25 {

class HttpMetrics {
 public:
  void record_request(const std::string& endpoint, int status);
  // Text for /metrics; `engine_text` is the engine's part ("" while the model loads).
  std::string render(const std::string& engine_text, bool ready, bool draining) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) → count
};

}  // namespace k25
