#include "engine/engine_stats.h"

#include <algorithm>

namespace k25 {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value) {
  size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  ++count_;
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot s;
  s.upper_bounds = bounds_;
  s.count = count_;
  s.sum = sum_;
  uint64_t running = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    running += counts_[i];
    s.cumulative_counts.push_back(running);
  }
  return s;
}

namespace {
// Seconds; TTFT spans queueing and prefill, inter-token latency one decode step.
std::vector<double> ttft_bounds() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> inter_token_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}
std::vector<double> request_bounds() {
  return {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}
std::vector<double> step_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}
std::vector<double> batch_sequence_bounds() {
  return {1, 2, 4, 8, 12, 16, 24, 32, 48, 64};
}
std::vector<double> batch_token_bounds() {
  return {1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048};
}
}  // namespace

EngineStats::EngineStats()
    : ttft_seconds(ttft_bounds()),
      inter_token_seconds(inter_token_bounds()),
      request_seconds(request_bounds()),
      step_seconds(step_bounds()),
      batch_sequences(batch_sequence_bounds()),
      batch_tokens(batch_token_bounds()) {}

}  // namespace k25
