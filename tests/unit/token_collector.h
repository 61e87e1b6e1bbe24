// An engine EventCallback for tests: collects a request's tokens; wait() blocks until it finished,
// finished() then gives the Finished event.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/request.h"

namespace k25 {

class TokenCollector {
 public:
  EventCallback callback() {
    return [this](const GenerationEvent& e) {
      std::lock_guard lock(mutex_);
      if (e.kind == GenerationEvent::Kind::Token) tokens_.push_back(e.token);
      if (e.kind == GenerationEvent::Kind::Finished) {
        finished_ = e;
        done_ = true;
        cv_.notify_all();
      }
    };
  }
  std::vector<TokenId> wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    return tokens_;
  }
  GenerationEvent finished() {
    wait();
    std::lock_guard lock(mutex_);
    return finished_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<TokenId> tokens_;
  GenerationEvent finished_;
};

}  // namespace k25
