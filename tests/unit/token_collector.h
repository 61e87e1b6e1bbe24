// An engine EventCallback for tests: collects a request's tokens; wait() blocks until it finished.
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

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<TokenId> tokens_;
};

}  // namespace k25
