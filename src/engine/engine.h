// The engine: one thread that owns the KV cache and the thread pool, takes generation requests
// from any thread, batches the decode/prefill tokens of all running sequences into one forward
// call per step, samples, and reports token events through each request's callback.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/scheduling_policy.h"
#include "model/model.h"

namespace k25 {

struct EngineOptions {
  int n_threads = 0;            // <= 0: hardware concurrency
  int max_batch_size = 24;      // concurrent sequences (KV slots), R-EB4
  int max_queue = 256;          // waiting requests before submit() answers QueueFull
  int context_size = 0;         // <= 0 or above the model's: the model's context_length
  int step_token_budget = 512;  // tokens per forward call (prompt chunks beyond decode tokens)
  // Testing aid: sleep this long before every forward call (makes the engine slow on purpose,
  // e.g. to exercise the server's fallback circuit breaker). 0 = off.
  int debug_step_delay_ms = 0;
};

enum class SubmitStatus { Accepted, QueueFull, ShuttingDown, Invalid };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::Accepted;
  RequestId id = 0;
  std::string message;  // why, when not accepted
};

class Engine {
 public:
  // `model` must outlive the engine. Starts the engine thread.
  Engine(Model& model, EngineOptions options, std::unique_ptr<SchedulingPolicy> policy = nullptr);
  ~Engine();  // cancels everything still running and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. On Accepted, `on_event` will be called (on the engine thread) until Finished.
  SubmitResult submit(GenerationRequest request, EventCallback on_event);
  // Thread-safe; unknown or finished ids are ignored. The request finishes with Cancelled.
  void cancel(RequestId id);
  // Cancels every request, waiting or running.
  void cancel_all();
  // Rejects new submits (ShuttingDown), cancels everything and stops the thread. Idempotent.
  void shutdown();

  // Requests accepted and not yet finished.
  int n_active() const;
  int context_size() const { return context_size_; }
  const Model& model() const { return model_; }
  const EngineStats& stats() const { return stats_; }

 private:
  struct Sequence;
  using Clock = std::chrono::steady_clock;

  void run();
  void admit_waiting();
  void apply_cancellations();
  void step();
  void on_logits(Sequence& seq, float* logits);
  void finish(Sequence& seq, FinishReason reason, std::string error = {});
  void release_finished();

  Model& model_;
  EngineOptions options_;
  int context_size_;
  std::unique_ptr<SchedulingPolicy> policy_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KvCache> kv_;
  EngineStats stats_;

  mutable std::mutex mutex_;  // guards the fields below up to the thread
  std::condition_variable wake_;
  bool stopping_ = false;
  RequestId next_id_ = 1;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::unordered_set<RequestId> cancel_requests_;
  bool cancel_everything_ = false;
  int n_running_shared_ = 0;

  // Engine thread only.
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<int> free_slots_;
  std::vector<float> logits_;
  std::thread thread_;
};

}  // namespace k25
