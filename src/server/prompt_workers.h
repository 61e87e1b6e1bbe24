// A few threads for the CPU work of preparing a request (body parsing, chat rendering,
// tokenisation). On the event-loop threads, one long prompt would stall every stream those
// threads serve.
#pragma once

#include <type_traits>

#include "server/asio.h"

namespace k25 {

class PromptWorkers {
 public:
  explicit PromptWorkers(int n_threads) : pool_(static_cast<size_t>(n_threads)) {}

  // Runs `work` on a worker, then resumes the calling coroutine on its own executor with the
  // result; what `work` throws comes out of the co_await.
  template <class Work>
  net::awaitable<std::invoke_result_t<Work&>> run(Work work) {
    using Result = std::invoke_result_t<Work&>;
    co_return co_await net::co_spawn(
        pool_.get_executor(), [&work]() -> net::awaitable<Result> { co_return work(); },
        net::use_awaitable);
  }

 private:
  net::thread_pool pool_;
};

}  // namespace k25
