// A few threads for the CPU work of preparing a request (body parsing, chat rendering,
// tokenisation). On the event-loop threads, one long prompt would stall every stream those
// threads serve. Small inputs are prepared in place: their work takes microseconds, and queued
// behind a long prompt on the pool (one thread with --io-threads 1) they would wait for it.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/asio.h"

namespace k25 {

class PromptWorkers {
 public:
  // Up to this many input bytes the work runs on the calling thread (about 2 ms of
  // tokenisation at ~0.2 ms per KiB).
  static constexpr size_t kInlineBytes = 8 << 10;

  explicit PromptWorkers(int n_threads) : pool_(static_cast<size_t>(n_threads)) {}

  // Runs `work`, whose cost grows with `input_bytes`: in place when that is small, otherwise on
  // a worker, and then resumes the calling coroutine on its own executor with the result; what
  // `work` throws comes out of the co_await.
  template <class Work>
  net::awaitable<std::invoke_result_t<Work&>> run(size_t input_bytes, Work work) {
    using Result = std::invoke_result_t<Work&>;
    if (input_bytes <= kInlineBytes) co_return work();
    co_return co_await net::co_spawn(
        pool_.get_executor(), [&work]() -> net::awaitable<Result> { co_return work(); },
        net::use_awaitable);
  }

 private:
  net::thread_pool pool_;
};

}  // namespace k25
