#include "server/metrics.h"

#include <sstream>

#include "core/prometheus_text.h"

namespace k25 {

void HttpMetrics::record_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

std::string HttpMetrics::render(const std::string& engine_text, bool ready, bool draining) const {
  std::ostringstream out;
  prometheus_header(out, "k25_ready", "gauge",
                    "1 when the model is loaded and requests are served.");
  out << "k25_ready " << (ready && !draining ? 1 : 0) << '\n';
  prometheus_header(out, "k25_draining", "gauge", "1 while shutting down.");
  out << "k25_draining " << (draining ? 1 : 0) << '\n';
  prometheus_header(out, "k25_http_requests_total", "counter",
                    "HTTP requests answered, by endpoint and status.");
  {
    std::lock_guard lock(mutex_);
    for (const auto& [key, count] : requests_) {
      out << "k25_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second
          << "\"} " << count << '\n';
    }
  }
  return out.str() + engine_text;
}

}  // namespace k25
