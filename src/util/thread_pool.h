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
  // Calls fn(thread_index) once on each of the size() threads (index 0 is the caller) and
  // returns when all have finished. Not reentrant.
  void run(const std::function<void(int thread_index)>& fn);

 private:
  struct State;
  int n_threads_;
  State* state_;
};

}  // namespace k25
