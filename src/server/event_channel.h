// Carries a request's engine events from the engine thread to the connection's coroutine; a
// request with n choices (n engine requests) shares one channel, each event tagged with its
// choice.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request.h"
#include "server/asio.h"

namespace k25 {

struct ChoiceEvent {
  int choice = 0;
  GenerationEvent event;
};

class EventChannel : public std::enable_shared_from_this<EventChannel> {
 public:
  // `executor` must be the (strand) executor of the coroutine that calls next().
  explicit EventChannel(net::any_io_executor executor) : executor_(executor), timer_(executor) {}

  // Engine thread: queue the event and wake the waiting coroutine.
  void push(int choice, const GenerationEvent& event);
  // Coroutine: the next event, or nullopt when none arrived within `poll` (so the caller can
  // look at its client meanwhile).
  net::awaitable<std::optional<ChoiceEvent>> next(std::chrono::milliseconds poll);

 private:
  std::optional<ChoiceEvent> pop();

  net::any_io_executor executor_;
  net::steady_timer timer_;  // used on the executor only
  std::mutex mutex_;
  std::deque<ChoiceEvent> events_;
};

}  // namespace k25
