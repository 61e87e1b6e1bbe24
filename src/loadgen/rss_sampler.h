// Samples a process's resident memory from /proc/PID/status every interval on a background
// thread: the peak of VmRSS seen and the kernel's own high-water mark VmHWM.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace k25::loadgen {

// A "Name:   1234 kB" field of /proc/PID/status, in bytes; nullopt when absent or malformed.
std::optional<long long> proc_status_bytes(std::string_view status, std::string_view name);

class RssSampler {
 public:
  // Throws k25::Error when /proc/PID/status cannot be read at the start.
  explicit RssSampler(pid_t pid,
                      std::chrono::milliseconds interval = std::chrono::milliseconds(100));
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  void stop();
  long long peak_rss_bytes() const;  // max(sampled VmRSS, last VmHWM)
  long long hwm_bytes() const;       // last VmHWM read (0 if the kernel gives none)
  // (seconds since the sampler started, VmRSS bytes)
  std::vector<std::pair<double, long long>> samples() const;

 private:
  bool sample();

  pid_t pid_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  long long peak_ = 0, hwm_ = 0;
  std::vector<std::pair<double, long long>> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace k25::loadgen
