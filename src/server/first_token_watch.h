// R-CFG3: what the fallback breaker counts as an engine failure. Slowness is judged against the
// work, as stalls: a request times out when the engine computed none of its positions for
// fallback.timeout_ms (it waits without a batch slot, or the engine is stuck). A long prompt
// whose prefill chunks keep coming never times out, however long its first token takes on a
// CPU. An engine error before the first token (a request the engine failed) is a failure too.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "server/engine_client.h"

namespace k25 {

class FirstTokenWatch {
 public:
  using Clock = std::chrono::steady_clock;
  // `progress`: the positions the engine has computed for the request so far (summed over its
  // choices; EngineClient::progress).
  FirstTokenWatch(Clock::time_point submitted, std::chrono::milliseconds stall_limit,
                  std::function<int64_t()> progress);
  // When the request times out, as seen at `now`: stall_limit after the last progress seen
  // (progress is seen when this is called, so call it at least every poll interval).
  Clock::time_point deadline(Clock::time_point now);

 private:
  std::chrono::milliseconds stall_limit_;
  std::function<int64_t()> progress_;
  int64_t seen_ = 0;
  Clock::time_point last_progress_;
};

// Whether the request's first event says the engine failed it (an Error finish).
bool engine_failed(const EngineEvent& first);

}  // namespace k25
