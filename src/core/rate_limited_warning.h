// A warning that may repeat at a high rate (every failed page read, every Redis round while it is
// down): printed to stderr at most once per interval, with the number of repeats it held back.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace k25 {

class RateLimitedWarning {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimitedWarning(Clock::duration interval = std::chrono::seconds(10))
      : interval_(interval) {}

  // Prints "warning: MESSAGE" (plus " (N similar suppressed)") unless one was printed less than
  // the interval ago, in which case it only counts. Returns whether it printed.
  bool warn(const std::string& message, Clock::time_point now = Clock::now());

 private:
  const Clock::duration interval_;
  std::mutex mutex_;
  bool printed_ = false;
  Clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

}  // namespace k25
