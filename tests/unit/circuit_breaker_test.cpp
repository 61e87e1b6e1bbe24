// The fallback circuit breaker's state machine (R-CFG3), driven with explicit time.
#include "server/circuit_breaker.h"

#include <gtest/gtest.h>

namespace k25 {
namespace {

using Route = CircuitBreaker::Route;
using std::chrono::milliseconds;
using std::chrono::seconds;

const CircuitBreaker::Clock::time_point t0{};

TEST(CircuitBreaker, OpensAfterThresholdConsecutiveTimeouts) {
  CircuitBreaker b(3, seconds(10));
  EXPECT_EQ(b.state(), CircuitState::Closed);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(b.route(t0), Route::Engine);
    b.on_failure(false, t0);
    EXPECT_EQ(b.state(), CircuitState::Closed);
  }
  EXPECT_EQ(b.consecutive_failures(), 2);
  b.on_failure(false, t0);
  EXPECT_EQ(b.state(), CircuitState::Open);
  EXPECT_EQ(b.route(t0 + seconds(1)), Route::Fallback);
}

TEST(CircuitBreaker, SuccessResetsTheCount) {
  CircuitBreaker b(3, seconds(10));
  b.on_failure(false, t0);
  b.on_failure(false, t0);
  b.on_success(false);
  EXPECT_EQ(b.consecutive_failures(), 0);
  b.on_failure(false, t0);
  b.on_failure(false, t0);
  EXPECT_EQ(b.state(), CircuitState::Closed);
}

TEST(CircuitBreaker, OneProbeAfterTheIntervalClosesOnSuccess) {
  CircuitBreaker b(1, seconds(10));
  b.on_failure(false, t0);
  ASSERT_EQ(b.state(), CircuitState::Open);
  EXPECT_EQ(b.route(t0 + milliseconds(9999)), Route::Fallback);
  EXPECT_EQ(b.route(t0 + seconds(10)), Route::Probe);
  EXPECT_EQ(b.state(), CircuitState::HalfOpen);
  // Only one probe at a time: the others keep going upstream.
  EXPECT_EQ(b.route(t0 + seconds(11)), Route::Fallback);
  b.on_success(true);
  EXPECT_EQ(b.state(), CircuitState::Closed);
  EXPECT_EQ(b.route(t0 + seconds(12)), Route::Engine);
}

TEST(CircuitBreaker, FailedProbeReopensForAnotherInterval) {
  CircuitBreaker b(1, seconds(10));
  b.on_failure(false, t0);
  ASSERT_EQ(b.route(t0 + seconds(10)), Route::Probe);
  b.on_failure(true, t0 + seconds(11));
  EXPECT_EQ(b.state(), CircuitState::Open);
  EXPECT_EQ(b.route(t0 + seconds(20)), Route::Fallback);
  EXPECT_EQ(b.route(t0 + seconds(21)), Route::Probe);
}

TEST(CircuitBreaker, LateAnswersOfOlderRequestsDoNotClose) {
  CircuitBreaker b(1, seconds(10));
  b.on_failure(false, t0);
  b.on_success(false);  // a request routed before the circuit opened
  EXPECT_EQ(b.state(), CircuitState::Open);
  ASSERT_EQ(b.route(t0 + seconds(10)), Route::Probe);
  b.on_success(false);
  b.on_failure(false, t0 + seconds(10));
  EXPECT_EQ(b.state(), CircuitState::HalfOpen);
}

TEST(CircuitBreaker, AbandonedProbeLetsTheNextRequestProbe) {
  CircuitBreaker b(1, seconds(10));
  b.on_failure(false, t0);
  ASSERT_EQ(b.route(t0 + seconds(10)), Route::Probe);
  b.on_probe_abandoned(t0 + seconds(10));
  EXPECT_EQ(b.state(), CircuitState::Open);
  EXPECT_EQ(b.route(t0 + seconds(10)), Route::Probe);
}

TEST(CircuitBreaker, StateNames) {
  EXPECT_STREQ(circuit_state_name(CircuitState::Closed), "closed");
  EXPECT_STREQ(circuit_state_name(CircuitState::Open), "open");
  EXPECT_STREQ(circuit_state_name(CircuitState::HalfOpen), "half_open");
}

}  // namespace
}  // namespace k25
