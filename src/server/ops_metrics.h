// The operations part of /metrics: the fallback circuit breaker (R-CFG3) and the start-up
// warm-up (R-CFG2).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "server/circuit_breaker.h"
#include "server/warmup.h"

namespace k25 {

struct FallbackCounters {
  std::atomic<uint64_t> proxied{0};          // requests answered by the upstream
  std::atomic<uint64_t> timeouts{0};         // engine first tokens later than the timeout
  std::atomic<uint64_t> upstream_errors{0};  // upstream unreachable or broken off
};

// `breaker` null: no fallback configured (state gauge 0). `warmup` empty: none ran yet.
std::string render_ops_metrics(const CircuitBreaker* breaker, const FallbackCounters& counters,
                               const std::optional<WarmupReport>& warmup);

}  // namespace k25
