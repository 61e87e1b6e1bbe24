// R-CFG3: the fallback circuit breaker. Closed: requests go to the engine; `failure_threshold`
// consecutive engine failures (server/first_token_watch.h says what counts: a stall or an engine
// error before the first token) open it. Open: requests go to the fallback upstream; once
// `probe_interval` has passed, the next request is a probe that goes to the engine (half-open).
// A probe answered in time closes the circuit; a probe that fails opens it again.
// Thread-safe; time is passed in so tests can drive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace k25 {

enum class CircuitState { Closed = 0, Open = 1, HalfOpen = 2 };
// "closed", "open", "half_open"
const char* circuit_state_name(CircuitState state);

class CircuitBreaker {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Route { Engine, Probe, Fallback };

  CircuitBreaker(int failure_threshold, std::chrono::milliseconds probe_interval);

  // Where the next request goes. At most one Probe is out at a time.
  Route route(Clock::time_point now);
  // The engine produced a first token in time (`probe`: the request was routed as Probe).
  void on_success(bool probe);
  // The engine did not produce a first token in time, or failed the request.
  void on_failure(bool probe, Clock::time_point now);
  // A probe ended without a verdict (its client left): the next request probes again.
  void on_probe_abandoned(Clock::time_point now);

  CircuitState state() const;
  int consecutive_failures() const;

 private:
  void open(Clock::time_point now);

  const int failure_threshold_;
  const std::chrono::milliseconds probe_interval_;
  mutable std::mutex mutex_;
  CircuitState state_ = CircuitState::Closed;
  int consecutive_failures_ = 0;
  Clock::time_point probe_after_{};
};

}  // namespace k25
