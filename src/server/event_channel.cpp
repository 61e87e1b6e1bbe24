#include "server/event_channel.h"

namespace k25 {

size_t EventChannel::event_bytes(const EngineEvent& e) {
  size_t bytes = sizeof(ChoiceEvent) + e.text.size() + e.matched_stop.size() + e.error.size() +
                 e.embedding.size() * sizeof(float);
  if (e.logprobs) bytes += e.logprobs->top.size() * sizeof(e.logprobs->top.front());
  return bytes;
}

void EventChannel::push(int choice, const EngineEvent& event) {
  std::function<void()> action;
  {
    std::lock_guard lock(mutex_);
    if (overflowed_) return;
    const size_t bytes = event_bytes(event);
    if (!events_.empty() && queued_bytes_ + bytes > max_queued_bytes_) {
      overflowed_ = true;
      std::deque<ChoiceEvent>().swap(events_);  // gives the memory back
      queued_bytes_ = 0;
      action = std::move(overflow_action_);
    } else {
      events_.push_back({choice, event});
      queued_bytes_ += bytes;
    }
  }
  if (action) net::post(executor_, std::move(action));
  // The cancel runs on the coroutine's strand, so it either finds the wait pending or comes
  // before the coroutine looks at the queue again.
  net::post(executor_, [self = shared_from_this()] { self->timer_.cancel(); });
}

void EventChannel::on_overflow(std::function<void()> action) {
  std::lock_guard lock(mutex_);
  if (overflowed_) {
    net::post(executor_, std::move(action));
  } else {
    overflow_action_ = std::move(action);
  }
}

bool EventChannel::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

std::optional<ChoiceEvent> EventChannel::pop() {
  std::lock_guard lock(mutex_);
  if (events_.empty()) return std::nullopt;
  queued_bytes_ -= event_bytes(events_.front().event);
  ChoiceEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

net::awaitable<std::optional<ChoiceEvent>> EventChannel::next(std::chrono::milliseconds poll) {
  if (auto event = pop()) co_return event;
  if (overflowed()) co_return std::nullopt;
  timer_.expires_after(poll);
  boost::system::error_code ec;
  co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  co_return pop();
}

}  // namespace k25
