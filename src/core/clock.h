// Milliseconds between steady-clock readings, as latencies are reported everywhere in k25.
#pragma once

#include <chrono>

namespace k25 {

inline double ms_between(std::chrono::steady_clock::time_point a,
                         std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double ms_since(std::chrono::steady_clock::time_point start) {
  return ms_between(start, std::chrono::steady_clock::now());
}

}  // namespace k25
