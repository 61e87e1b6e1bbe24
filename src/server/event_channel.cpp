#include "server/event_channel.h"

namespace k25 {

void EventChannel::push(int choice, const GenerationEvent& event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back({choice, event});
  }
  // The cancel runs on the coroutine's strand, so it either finds the wait pending or comes
  // before the coroutine looks at the queue again.
  net::post(executor_, [self = shared_from_this()] { self->timer_.cancel(); });
}

std::optional<ChoiceEvent> EventChannel::pop() {
  std::lock_guard lock(mutex_);
  if (events_.empty()) return std::nullopt;
  ChoiceEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

net::awaitable<std::optional<ChoiceEvent>> EventChannel::next(std::chrono::milliseconds poll) {
  if (auto event = pop()) co_return event;
  timer_.expires_after(poll);
  boost::system::error_code ec;
  co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  co_return pop();
}

}  // namespace k25
