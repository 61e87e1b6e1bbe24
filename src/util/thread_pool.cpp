// Thread pool with a generation counter: run() bumps the generation, workers that see the new
// value call the job and count themselves done. Waiting is a short spin (the next parallel
// section of a decode step usually follows within microseconds) and then a futex-backed
// std::atomic::wait, so idle workers do not burn a core that other work could use.
//
// Exceptions: fn should not throw, but if it does on any thread, the first exception is caught
// and rethrown from run() on the caller after every thread has finished the section.
#include "util/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace k25 {
namespace {

// Pause instructions before falling back to a futex wait: about 100 microseconds on Zen 4
// (measured), far longer than the gaps between the parallel sections of one decode step and
// short enough that idle workers soon stop taking CPU from other processes.
constexpr int kSpinIterations = 1 << 12;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until `value` differs from `old`: spins first, then sleeps. `sleepers` counts threads
// that may be blocked in wait(), so the notifier can skip the syscall when nobody sleeps.
uint32_t wait_for_change(const std::atomic<uint32_t>& value, uint32_t old,
                         std::atomic<int>& sleepers) {
  for (int i = 0; i < kSpinIterations; ++i) {
    uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
  }
  sleepers.fetch_add(1, std::memory_order_seq_cst);
  uint32_t now;
  while ((now = value.load(std::memory_order_seq_cst)) == old) value.wait(old);
  sleepers.fetch_sub(1, std::memory_order_relaxed);
  return now;
}

void notify_if_sleeping(std::atomic<uint32_t>& value, const std::atomic<int>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) > 0) value.notify_all();
}

}  // namespace

struct ThreadPool::State {
  // Bumped by run() to start a section; workers remember the last value they served.
  std::atomic<uint32_t> generation{0};
  std::atomic<int> worker_sleepers{0};
  // Number of workers that finished the current section.
  std::atomic<uint32_t> done{0};
  std::atomic<int> caller_sleepers{0};
  std::atomic<bool> stop{false};
  const std::function<void(int)>* job = nullptr;
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::thread> workers;

  void call(int index) {
    try {
      (*job)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }

  void worker_loop(int index) {
    uint32_t seen = 0;
    for (;;) {
      seen = wait_for_change(generation, seen, worker_sleepers);
      if (stop.load(std::memory_order_acquire)) return;
      call(index);
      done.fetch_add(1, std::memory_order_seq_cst);
      notify_if_sleeping(done, caller_sleepers);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  state_ = new State;
  state_->workers.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) {
    state_->workers.emplace_back([this, i] { state_->worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  state_->stop.store(true, std::memory_order_release);
  state_->generation.fetch_add(1, std::memory_order_seq_cst);
  state_->generation.notify_all();
  for (auto& t : state_->workers) t.join();
  delete state_;
}

void ThreadPool::run(const std::function<void(int thread_index)>& fn) {
  State& s = *state_;
  s.job = &fn;
  if (n_threads_ > 1) {
    s.done.store(0, std::memory_order_relaxed);
    s.generation.fetch_add(1, std::memory_order_seq_cst);
    notify_if_sleeping(s.generation, s.worker_sleepers);
  }
  s.call(0);
  const uint32_t workers = static_cast<uint32_t>(n_threads_ - 1);
  uint32_t finished = s.done.load(std::memory_order_acquire);
  while (finished != workers) finished = wait_for_change(s.done, finished, s.caller_sleepers);
  s.job = nullptr;
  if (s.error) {
    std::exception_ptr error = s.error;
    s.error = nullptr;
    std::rethrow_exception(error);
  }
}

}  // namespace k25
