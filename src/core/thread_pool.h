// A fixed pool of worker threads for data-parallel kernels. The calling thread takes part, so
// ThreadPool(1) runs everything inline. Workers spin briefly before sleeping, because a decode
// step issues hundreds of short parallel sections per token.
#pragma once

#include <functional>

namespace k25 {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(thread_index) once for each index in [0, size()) and returns when all have
  // finished. Index 0 runs on the caller; index i runs on worker i, or on the caller when that
  // worker has not started it by the time the caller is done with its own, so calls must not
  // wait for one another. Not reentrant.
  void run(const std::function<void(int thread_index)>& fn);

 private:
  struct State;
  int n_threads_;
  State* state_;
};

}  // namespace k25
