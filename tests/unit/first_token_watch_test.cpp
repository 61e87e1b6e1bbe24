// What the fallback breaker counts as an engine failure (R-CFG3): a stall before the first
// token, or an engine error; never a long prompt whose prefill keeps progressing.
#include "server/first_token_watch.h"

#include <gtest/gtest.h>

#include "server/circuit_breaker.h"

namespace k25 {
namespace {

using std::chrono::milliseconds;
using Clock = FirstTokenWatch::Clock;

const Clock::time_point t0{};

// The watch reads the engine's count of computed positions through a function.
std::function<int64_t()> reader(const std::shared_ptr<std::atomic<int64_t>>& counter) {
  return [counter] { return counter->load(); };
}

TEST(FirstTokenWatch, WithoutProgressTheRequestTimesOutAfterTheLimit) {
  auto progress = std::make_shared<std::atomic<int64_t>>(0);
  FirstTokenWatch watch(t0, milliseconds(1000), reader(progress));
  EXPECT_EQ(watch.deadline(t0), t0 + milliseconds(1000));
  EXPECT_EQ(watch.deadline(t0 + milliseconds(999)), t0 + milliseconds(1000));
  // Progress restarts the limit from when it is seen; then a stall times out again.
  progress->fetch_add(8);
  EXPECT_EQ(watch.deadline(t0 + milliseconds(600)), t0 + milliseconds(1600));
  EXPECT_EQ(watch.deadline(t0 + milliseconds(1500)), t0 + milliseconds(1600));
}

TEST(FirstTokenWatch, SlowButProgressingLongPromptsDoNotOpenTheCircuitRealFailuresDo) {
  CircuitBreaker breaker(1, std::chrono::seconds(10));
  // A 4096-token prompt in 128-token chunks of 900 ms each: 29 s to its first token against a
  // 1 s limit. Polled every 100 ms, as the server does.
  auto progress = std::make_shared<std::atomic<int64_t>>(0);
  FirstTokenWatch watch(t0, milliseconds(1000), reader(progress));
  bool timed_out = false;
  for (int ms = 0; ms <= 32 * 900 && !timed_out; ms += 100) {
    const Clock::time_point now = t0 + milliseconds(ms);
    if (ms > 0 && ms % 900 == 0) progress->fetch_add(128);
    timed_out = now >= watch.deadline(now);
  }
  EXPECT_FALSE(timed_out);
  breaker.on_success(false);
  EXPECT_EQ(breaker.state(), CircuitState::Closed);

  // The engine stuck (or the request queued without a slot): no progress for the limit.
  auto stuck = std::make_shared<std::atomic<int64_t>>(0);
  FirstTokenWatch stalled(t0, milliseconds(1000), reader(stuck));
  EXPECT_TRUE(t0 + milliseconds(1000) >= stalled.deadline(t0 + milliseconds(1000)));
  breaker.on_failure(false, t0 + milliseconds(1000));
  EXPECT_EQ(breaker.state(), CircuitState::Open);
}

TEST(FirstTokenWatch, AnErrorFinishIsAnEngineFailureOtherEventsAreNot) {
  EngineEvent token;
  EXPECT_FALSE(engine_failed(token));
  EngineEvent finished;
  finished.kind = EngineEvent::Kind::Finished;
  for (FinishReason reason : {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled}) {
    finished.finish_reason = reason;
    EXPECT_FALSE(engine_failed(finished)) << finish_reason_name(reason);
  }
  finished.finish_reason = FinishReason::Error;
  EXPECT_TRUE(engine_failed(finished));
}

}  // namespace
}  // namespace k25
