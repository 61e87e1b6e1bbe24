// Counters and latency histograms the engine keeps for /metrics and k25_metrics(); safe to read
// from any thread while the engine runs.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace k25 {

// Cumulative histogram with fixed upper bounds (Prometheus semantics: bucket i counts the
// observations <= bounds[i]; the implicit +Inf bucket is `count`).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // one per bound
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

struct EngineStats {
  EngineStats();
  std::atomic<int64_t> requests_running{0};
  std::atomic<int64_t> requests_waiting{0};
  // Finished requests by FinishReason (index = enum value).
  std::array<std::atomic<uint64_t>, 4> requests_finished{};
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> completion_tokens{0};
  std::atomic<uint64_t> forward_calls{0};
  std::atomic<uint64_t> kv_bytes_used{0};
  std::atomic<uint64_t> kv_pages_used{0};
  std::atomic<uint64_t> kv_pages_total{0};
  std::atomic<int64_t> micro_task_queue_len{0};  // R-EB6: prefill micro-tasks not yet run
  // The step cost the scheduler uses now (measured when engine.target_step_ms > 0).
  std::atomic<int64_t> step_token_budget{0};
  std::atomic<double> step_position_cost{0};
  std::atomic<uint64_t> preemptions{0};
  std::atomic<uint64_t> kv_drops{0};           // sequences whose KV was released for recompute
  std::atomic<uint64_t> recomputed_tokens{0};  // positions computed again after a drop
  std::atomic<uint64_t> queue_timeouts{0};
  // Exceptions inside a step that belonged to no request (its requests failed, the engine went
  // on); one request's own are counted as its Error finish only.
  std::atomic<uint64_t> step_failures{0};
  std::atomic<uint64_t> adaptive_updates{0};  // Level 3 plan decisions
  // Speculative decoding: draft tokens verified, and of those the ones kept (engine/speculation.h).
  std::atomic<uint64_t> spec_drafted_tokens{0};
  std::atomic<uint64_t> spec_accepted_tokens{0};
  std::atomic<uint64_t> spec_draft_forward_calls{0};  // self-speculation's draft-plan calls
  // Prefix reuse (R-KV4, docs/kv-cache.md).
  std::atomic<uint64_t> cached_prompt_tokens{0};     // prompt tokens taken from the prefix cache
  std::atomic<uint64_t> session_requests{0};         // admitted requests carrying a session id
  std::atomic<uint64_t> session_cached_tokens{0};    // cached_prompt_tokens of those
  std::atomic<uint64_t> prefix_cache_pages{0};       // L2 pages the prefix cache holds
  std::atomic<uint64_t> prefix_cache_idle_pages{0};  // of those, used by no sequence (evictable)
  std::atomic<uint64_t> prefix_cache_evictions{0};   // idle pages given back to the pool
  std::atomic<double> l1_hit_share{0};  // key positions attention read from the L1 ring
  // L3 behind the prefix cache.
  std::atomic<uint64_t> l3_spills{0};          // pages written
  std::atomic<uint64_t> l3_spill_failures{0};  // writes that failed (no space, I/O error)
  std::atomic<uint64_t> l3_restores{0};        // pages read back into L2
  std::atomic<uint64_t> kv_bytes_released{0};  // free L2 page memory given back to the OS
  std::atomic<uint64_t> l3_idle_spills{0};     // cached pages moved to L3 after idling
  // Session prefetch (R-KV3): chains read back ahead of a hot session's turn, the pages they
  // brought, and prefetches not started for want of free L2 pages.
  std::atomic<uint64_t> l3_prefetches{0};
  std::atomic<uint64_t> l3_prefetched_pages{0};
  std::atomic<uint64_t> l3_prefetch_skipped{0};
  std::atomic<uint64_t> l3_lookup_pages{0};    // prompt pages missing in L2, looked up in L3
  std::atomic<uint64_t> l3_recomputations{0};  // pages found in L3 but unusable: recomputed
  std::atomic<uint64_t> l3_pages_stored{0};
  std::atomic<uint64_t> l3_dropped{0};              // least recently used pages erased to make room
  std::atomic<double> l3_read_latency_p99_s{0};     // the device: in the ring to completion
  std::atomic<double> l3_read_queue_wait_p99_s{0};  // submission until it entered the ring
  // The disk's failures (L3TierStats): damage detected and counted, never served.
  std::atomic<uint64_t> l3_checksum_failures{0}, l3_io_errors{0}, l3_no_space{0};
  std::atomic<uint64_t> l3_journal_errors{0}, l3_files_lost{0};
  std::atomic<uint64_t> l3_writes_in_flight{0};  // spills not acknowledged (nor failed) yet
  // Prompt tokens taken from each tier (k25_cached_tokens_total{tier}).
  std::atomic<uint64_t> cached_tokens_l2{0};
  std::atomic<uint64_t> cached_tokens_disk{0};
  std::atomic<uint64_t> cached_tokens_shared{0};
  // The shared (Redis) tier, when configured (kv/prefix_tier.h SharedTierStats).
  std::atomic<bool> shared_tier{false};
  std::atomic<bool> shared_up{false};
  std::atomic<uint64_t> shared_hits{0};
  std::atomic<uint64_t> shared_misses{0};
  std::atomic<uint64_t> shared_bytes_in{0};
  std::atomic<uint64_t> shared_bytes_out{0};
  std::atomic<uint64_t> shared_errors{0};
  std::atomic<uint64_t> shared_corrupt{0};
  std::atomic<uint64_t> shared_writes{0};
  std::atomic<uint64_t> shared_writes_skipped{0};
  std::atomic<uint64_t> shared_writes_in_flight{0};
  std::atomic<uint64_t> shared_restores{0};
  std::atomic<double> shared_read_p50_s{0};
  std::atomic<double> shared_read_p99_s{0};
  Histogram ttft_seconds;
  Histogram inter_token_seconds;
  Histogram request_seconds;
  Histogram step_seconds;     // one engine step (all its forward calls)
  Histogram batch_sequences;  // sequences per step
  Histogram batch_tokens;     // tokens per step
};

}  // namespace k25
