#include "core/rate_limited_warning.h"

#include <iostream>

namespace k25 {

bool RateLimitedWarning::warn(const std::string& message, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (printed_ && now - last_ < interval_) {
    ++suppressed_;
    return false;
  }
  std::cerr << "warning: " << message;
  if (suppressed_) std::cerr << " (" << suppressed_ << " similar suppressed)";
  std::cerr << "\n";
  printed_ = true;
  last_ = now;
  suppressed_ = 0;
  return true;
}

}  // namespace k25
