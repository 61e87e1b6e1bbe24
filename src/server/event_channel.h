// Carries a request's engine events from the engine thread to the connection's coroutine; a
// request with n choices (n engine requests) shares one channel, each event tagged with its
// choice. The events waiting for the coroutine are bounded in bytes: a streaming client that
// stops reading blocks its coroutine in a write while the engine keeps producing.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "core/asio.h"
#include "server/engine_client.h"

namespace k25 {

struct ChoiceEvent {
  int choice = 0;
  EngineEvent event;
};

class EventChannel : public std::enable_shared_from_this<EventChannel> {
 public:
  // `executor` must be the (strand) executor of the coroutine that calls next(). Once the
  // waiting events would take more than `max_queued_bytes` (one event always fits), the channel
  // overflows: it drops them and every later one, and runs the overflow action.
  explicit EventChannel(net::any_io_executor executor,
                        size_t max_queued_bytes = std::numeric_limits<size_t>::max())
      : executor_(executor), timer_(executor), max_queued_bytes_(max_queued_bytes) {}

  // Engine thread: queue the event and wake the waiting coroutine.
  void push(int choice, const EngineEvent& event);
  // Coroutine: the next event, or nullopt when none arrived within `poll` (so the caller can
  // look at its client meanwhile) or the channel overflowed.
  net::awaitable<std::optional<ChoiceEvent>> next(std::chrono::milliseconds poll);
  // Runs `action` on the executor once the channel overflows (soon, if it already has).
  void on_overflow(std::function<void()> action);
  bool overflowed() const;
  // The heap bytes a queued event holds (approximately: the struct and its payloads).
  static size_t event_bytes(const EngineEvent& event);

 private:
  std::optional<ChoiceEvent> pop();

  net::any_io_executor executor_;
  net::steady_timer timer_;  // used on the executor only
  const size_t max_queued_bytes_;
  mutable std::mutex mutex_;
  std::deque<ChoiceEvent> events_;
  size_t queued_bytes_ = 0;
  bool overflowed_ = false;
  std::function<void()> overflow_action_;
};

}  // namespace k25
