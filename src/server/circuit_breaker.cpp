#include "server/circuit_breaker.h"

namespace k25 {

const char* circuit_state_name(CircuitState state) {
  switch (state) {
    case CircuitState::Closed:
      return "closed";
    case CircuitState::Open:
      return "open";
    case CircuitState::HalfOpen:
      return "half_open";
  }
  return "closed";
}

CircuitBreaker::CircuitBreaker(int failure_threshold, std::chrono::milliseconds probe_interval)
    : failure_threshold_(failure_threshold < 1 ? 1 : failure_threshold),
      probe_interval_(probe_interval) {}

CircuitBreaker::Route CircuitBreaker::route(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  switch (state_) {
    case CircuitState::Closed:
      return Route::Engine;
    case CircuitState::Open:
      if (now < probe_after_) return Route::Fallback;
      state_ = CircuitState::HalfOpen;
      return Route::Probe;
    case CircuitState::HalfOpen:
      return Route::Fallback;  // the probe is still out
  }
  return Route::Engine;
}

void CircuitBreaker::on_success(bool probe) {
  std::lock_guard lock(mutex_);
  if (probe && state_ == CircuitState::HalfOpen) {
    state_ = CircuitState::Closed;
    consecutive_failures_ = 0;
  } else if (state_ == CircuitState::Closed) {
    consecutive_failures_ = 0;
  }
  // A request sent before the circuit opened says nothing about the engine now.
}

void CircuitBreaker::on_failure(bool probe, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (probe && state_ == CircuitState::HalfOpen) {
    open(now);
  } else if (state_ == CircuitState::Closed && ++consecutive_failures_ >= failure_threshold_) {
    open(now);
  }
}

void CircuitBreaker::on_probe_abandoned(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (state_ != CircuitState::HalfOpen) return;
  state_ = CircuitState::Open;
  probe_after_ = now;
}

void CircuitBreaker::open(Clock::time_point now) {
  state_ = CircuitState::Open;
  probe_after_ = now + probe_interval_;
}

CircuitState CircuitBreaker::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

int CircuitBreaker::consecutive_failures() const {
  std::lock_guard lock(mutex_);
  return consecutive_failures_;
}

}  // namespace k25
