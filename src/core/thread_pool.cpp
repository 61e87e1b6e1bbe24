// Thread pool with a generation counter: run() bumps the generation, workers that see the new
// value claim their index, call the job and count themselves done. After its own index the
// caller claims and runs every index whose worker has not yet claimed it, so a section never
// waits for a thread that is not running (with more runnable threads than cores, waiting for a
// descheduled worker cost a scheduler time slice per section: 100x slowdowns). Waiting is a short
// spin (the next parallel section of a decode step usually follows within microseconds), then a few
// sched_yield calls (so a waiter gives its core to the thread it waits for when cores are
// oversubscribed), then a futex-backed std::atomic::wait, so idle workers do not burn a core that
// other work could use.
//
// Exceptions: fn should not throw, but if it does on any thread, the first exception is caught
// and rethrown from run() on the caller after every thread has finished the section.
#include "core/thread_pool.h"

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

// Pause instructions before yielding: about 25 microseconds on Zen 4, longer than the gaps
// between the parallel sections of one decode step.
constexpr int kSpinIterations = 1 << 10;
// sched_yield calls before falling back to a futex wait. When the machine is oversubscribed, the
// thread being waited for may need this core: yielding hands it over at once instead of burning
// the time slice in pause loops (that made 2-thread runs of a tiny model 100x slower than one
// thread while a compile ran). On an idle machine a yield returns within a microsecond, so this
// phase still reacts quickly.
constexpr int kYieldIterations = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until `value` differs from `old`: spins, then yields, then sleeps. `sleepers` counts
// threads that may be blocked in wait(), so the notifier can skip the syscall when nobody sleeps.
uint32_t wait_for_change(const std::atomic<uint32_t>& value, uint32_t old,
                         std::atomic<int>& sleepers) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
  }
  for (int i = 0; i < kYieldIterations; ++i) {
    const uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    std::this_thread::yield();
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
  explicit State(int n) : claimed(n) {}

  // Bumped by run() to start a section; workers remember the last value they served.
  std::atomic<uint32_t> generation{0};
  std::atomic<int> worker_sleepers{0};
  // claimed[i] is the last generation whose index i someone (worker i or the caller) took.
  std::vector<std::atomic<uint32_t>> claimed;
  // Number of indices other than 0 that finished the current section.
  std::atomic<uint32_t> done{0};
  std::atomic<int> caller_sleepers{0};
  std::atomic<bool> stop{false};
  const std::function<void(int)>* job = nullptr;
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::thread> workers;

  bool claim(int index, uint32_t gen) {
    uint32_t previous = gen - 1;
    return claimed[index].compare_exchange_strong(previous, gen, std::memory_order_acq_rel);
  }

  void call(int index) {
    try {
      (*job)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  }

  void finish() {
    done.fetch_add(1, std::memory_order_seq_cst);
    notify_if_sleeping(done, caller_sleepers);
  }

  void worker_loop(int index) {
    uint32_t seen = 0;
    for (;;) {
      seen = wait_for_change(generation, seen, worker_sleepers);
      if (stop.load(std::memory_order_acquire)) return;
      // The caller may have run this index already (this thread woke late); then skip it.
      if (!claim(index, seen)) continue;
      call(index);
      finish();
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  state_ = new State(n_threads_);
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
  uint32_t gen = 0;
  if (n_threads_ > 1) {
    s.done.store(0, std::memory_order_relaxed);
    gen = s.generation.fetch_add(1, std::memory_order_seq_cst) + 1;
    notify_if_sleeping(s.generation, s.worker_sleepers);
  }
  s.call(0);
  // Indices whose workers have not started yet (descheduled on a busy machine, or asleep) run
  // here rather than making the caller wait for those threads to get a core.
  for (int i = 1; i < n_threads_; ++i) {
    if (s.claim(i, gen)) {
      s.call(i);
      s.finish();
    }
  }
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
