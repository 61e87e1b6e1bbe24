#include "server/first_token_watch.h"

namespace k25 {

FirstTokenWatch::FirstTokenWatch(Clock::time_point submitted, std::chrono::milliseconds stall_limit,
                                 std::function<int64_t()> progress)
    : stall_limit_(stall_limit), progress_(std::move(progress)), last_progress_(submitted) {}

FirstTokenWatch::Clock::time_point FirstTokenWatch::deadline(Clock::time_point now) {
  const int64_t computed = progress_();
  if (computed != seen_) {
    seen_ = computed;
    last_progress_ = now;
  }
  return last_progress_ + stall_limit_;
}

bool engine_failed(const EngineEvent& first) {
  return first.kind == EngineEvent::Kind::Finished && first.finish_reason == FinishReason::Error;
}

}  // namespace k25
