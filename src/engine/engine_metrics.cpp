#include "engine/engine_metrics.h"

#include <sstream>

#include "engine/request.h"

namespace k25 {

namespace {

void histogram(std::ostringstream& out, const char* name, const char* help, const Histogram& h) {
  prometheus_header(out, name, "histogram", help);
  Histogram::Snapshot s = h.snapshot();
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    out << name << "_bucket{le=\"" << s.upper_bounds[i] << "\"} " << s.cumulative_counts[i] << '\n';
  }
  out << name << "_bucket{le=\"+Inf\"} " << s.count << '\n';
  out << name << "_sum " << s.sum << '\n';
  out << name << "_count " << s.count << '\n';
}

// The shared (Redis) KV tier, with flash_scheduler.l3_backend redis or disk+redis.
void render_shared_tier_metrics(std::ostringstream& out, const EngineStats& e) {
  const auto counter = [&out](const char* name, const char* help, uint64_t value) {
    prometheus_header(out, name, "counter", help);
    out << name << ' ' << value << '\n';
  };
  counter("k25_shared_kv_hits_total", "Pages asked of Redis that it held.", e.shared_hits.load());
  counter("k25_shared_kv_misses_total", "Pages asked of Redis that it did not hold.",
          e.shared_misses.load());
  counter("k25_shared_kv_bytes_in_total", "Bytes of pages read from Redis.",
          e.shared_bytes_in.load());
  counter("k25_shared_kv_bytes_out_total", "Bytes of pages written to Redis.",
          e.shared_bytes_out.load());
  counter("k25_shared_kv_errors_total",
          "Redis requests that failed (down, slow, full); the pages were recomputed.",
          e.shared_errors.load());
  counter("k25_shared_kv_corrupt_total",
          "Values from Redis that failed the CRC or header check; recomputed.",
          e.shared_corrupt.load());
  counter("k25_shared_kv_writes_total", "Pages written to Redis.", e.shared_writes.load());
  counter("k25_shared_kv_writes_skipped_total",
          "Pages not written to Redis (too many writes in flight).",
          e.shared_writes_skipped.load());
  counter("k25_shared_kv_restores_total", "Pages restored from Redis into L2.",
          e.shared_restores.load());
  prometheus_header(out, "k25_shared_kv_writes_in_flight", "gauge",
                    "Pages being written to Redis (SET sent, no reply yet).");
  out << "k25_shared_kv_writes_in_flight " << e.shared_writes_in_flight.load() << '\n';
  prometheus_header(out, "k25_shared_kv_read_latency_seconds", "gauge",
                    "GET submission to completion (pipelined), quantiles.");
  out << "k25_shared_kv_read_latency_seconds{quantile=\"0.5\"} " << e.shared_read_p50_s.load()
      << '\n';
  out << "k25_shared_kv_read_latency_seconds{quantile=\"0.99\"} " << e.shared_read_p99_s.load()
      << '\n';
  prometheus_header(out, "k25_shared_kv_up", "gauge",
                    "1 when the last Redis round trip succeeded.");
  out << "k25_shared_kv_up " << (e.shared_up.load() ? 1 : 0) << '\n';
}

}  // namespace

std::string render_engine_metrics(const EngineStats& e) {
  std::ostringstream out;
  prometheus_header(out, "k25_requests_running", "gauge", "Requests holding a sequence slot.");
  out << "k25_requests_running " << e.requests_running.load() << '\n';
  prometheus_header(out, "k25_requests_waiting", "gauge", "Requests queued for a sequence slot.");
  out << "k25_requests_waiting " << e.requests_waiting.load() << '\n';
  prometheus_header(out, "k25_requests_finished_total", "counter",
                    "Finished generation requests by reason.");
  for (FinishReason r :
       {FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled, FinishReason::Error}) {
    out << "k25_requests_finished_total{reason=\"" << finish_reason_name(r) << "\"} "
        << e.requests_finished[static_cast<int>(r)].load() << '\n';
  }
  prometheus_header(out, "k25_prompt_tokens_total", "counter", "Prompt tokens admitted.");
  out << "k25_prompt_tokens_total " << e.prompt_tokens.load() << '\n';
  prometheus_header(out, "k25_completion_tokens_total", "counter", "Tokens generated.");
  out << "k25_completion_tokens_total " << e.completion_tokens.load() << '\n';
  prometheus_header(out, "k25_forward_calls_total", "counter", "Batched forward passes run.");
  out << "k25_forward_calls_total " << e.forward_calls.load() << '\n';
  prometheus_header(out, "k25_kv_cache_bytes_used", "gauge", "KV cache bytes held, by tier.");
  out << "k25_kv_cache_bytes_used{tier=\"l2\"} " << e.kv_bytes_used.load() << '\n';
  prometheus_header(out, "k25_kv_pages_used", "gauge", "L2 KV pages in use.");
  out << "k25_kv_pages_used " << e.kv_pages_used.load() << '\n';
  prometheus_header(out, "k25_kv_pages_free", "gauge", "L2 KV pages free under the budget.");
  out << "k25_kv_pages_free " << e.kv_pages_total.load() - e.kv_pages_used.load() << '\n';
  prometheus_header(
      out, "flash_scheduler_micro_task_queue_len", "gauge",
      "Prefill micro-tasks not yet run (healthy below 5; above 10 for long, the scheduler is "
      "the bottleneck).");
  out << "flash_scheduler_micro_task_queue_len " << e.micro_task_queue_len.load() << '\n';
  prometheus_header(out, "k25_step_token_budget", "gauge",
                    "Token budget of one engine step (measured when engine.target_step_ms > 0).");
  out << "k25_step_token_budget " << e.step_token_budget.load() << '\n';
  prometheus_header(
      out, "k25_step_position_cost", "gauge",
      "Budget a token takes per position of context (measured when engine.target_step_ms > 0).");
  out << "k25_step_position_cost " << e.step_position_cost.load() << '\n';
  prometheus_header(
      out, "k25_preemptions_total", "counter",
      "Running sequences sent back to the queue for a higher-priority request or memory.");
  out << "k25_preemptions_total " << e.preemptions.load() << '\n';
  prometheus_header(out, "k25_kv_drops_total", "counter",
                    "Sequences whose KV was released under memory pressure (recomputed later).");
  out << "k25_kv_drops_total " << e.kv_drops.load() << '\n';
  prometheus_header(out, "k25_recomputed_tokens_total", "counter",
                    "KV positions computed a second time.");
  out << "k25_recomputed_tokens_total " << e.recomputed_tokens.load() << '\n';
  prometheus_header(out, "flash_adaptive_plan_updates_total", "counter",
                    "Level 3 decisions (every 32 decode tokens of an adaptively pruned request).");
  out << "flash_adaptive_plan_updates_total " << e.adaptive_updates.load() << '\n';
  prometheus_header(out, "flash_spec_drafted_tokens_total", "counter",
                    "Speculative draft tokens the full model verified.");
  out << "flash_spec_drafted_tokens_total " << e.spec_drafted_tokens.load() << '\n';
  prometheus_header(
      out, "flash_spec_accepted_tokens_total", "counter",
      "Speculative draft tokens the full model kept (its own greedy or sampled choice).");
  out << "flash_spec_accepted_tokens_total " << e.spec_accepted_tokens.load() << '\n';
  prometheus_header(out, "flash_spec_draft_forward_calls_total", "counter",
                    "Forward calls self-speculation made under its draft plans.");
  out << "flash_spec_draft_forward_calls_total " << e.spec_draft_forward_calls.load() << '\n';
  const uint64_t prompt_tokens = e.prompt_tokens.load();
  prometheus_header(
      out, "flash_l2_cache_hit_rate", "gauge",
      "Prompt tokens whose KV came from the L2 prefix cache, over all prompt tokens admitted "
      "(R-KV6; healthy above 0.85 for multi-turn sessions).");
  out << "flash_l2_cache_hit_rate "
      << (prompt_tokens ? static_cast<double>(e.cached_prompt_tokens.load()) / prompt_tokens : 0.0)
      << '\n';
  prometheus_header(out, "k25_cached_prompt_tokens_total", "counter",
                    "Prompt tokens reused from the prefix cache instead of computed.");
  out << "k25_cached_prompt_tokens_total " << e.cached_prompt_tokens.load() << '\n';
  prometheus_header(out, "k25_session_requests_total", "counter",
                    "Requests admitted with a session id.");
  out << "k25_session_requests_total " << e.session_requests.load() << '\n';
  prometheus_header(out, "k25_session_cached_prompt_tokens_total", "counter",
                    "Prompt tokens of session requests reused from the prefix cache.");
  out << "k25_session_cached_prompt_tokens_total " << e.session_cached_tokens.load() << '\n';
  prometheus_header(out, "flash_prefix_cache_pages", "gauge",
                    "L2 KV pages held by the prefix cache, by state (idle ones are evictable).");
  out << "flash_prefix_cache_pages{state=\"all\"} " << e.prefix_cache_pages.load() << '\n';
  out << "flash_prefix_cache_pages{state=\"idle\"} " << e.prefix_cache_idle_pages.load() << '\n';
  prometheus_header(out, "flash_prefix_cache_evictions_total", "counter",
                    "Idle prefix-cache pages given back to the L2 pool when it needed room.");
  out << "flash_prefix_cache_evictions_total " << e.prefix_cache_evictions.load() << '\n';
  prometheus_header(
      out, "flash_l1_hit_share", "gauge",
      "Key positions attention read from the L1 ring over all it read (0 when L1 is off).");
  out << "flash_l1_hit_share " << e.l1_hit_share.load() << '\n';
  prometheus_header(
      out, "flash_l3_spills_total", "counter",
      "Prefix-cache pages written to L3 (evicted from L2, idle, preempted, at shutdown).");
  out << "flash_l3_spills_total " << e.l3_spills.load() << '\n';
  prometheus_header(out, "k25_kv_released_bytes_total", "counter",
                    "Memory of free L2 pages given back to the OS (with l3_idle_seconds).");
  out << "k25_kv_released_bytes_total " << e.kv_bytes_released.load() << '\n';
  prometheus_header(out, "flash_l3_idle_evictions_total", "counter",
                    "Cached pages moved from L2 to L3 after l3_idle_seconds without use.");
  out << "flash_l3_idle_evictions_total " << e.l3_idle_spills.load() << '\n';
  prometheus_header(out, "flash_l3_prefetches_total", "counter",
                    "Hot sessions whose pages were read back from L3 ahead of their next turn.");
  out << "flash_l3_prefetches_total " << e.l3_prefetches.load() << '\n';
  prometheus_header(out, "flash_l3_prefetched_pages_total", "counter",
                    "Pages the session prefetches read back from L3 into L2.");
  out << "flash_l3_prefetched_pages_total " << e.l3_prefetched_pages.load() << '\n';
  prometheus_header(out, "flash_l3_prefetch_skipped_total", "counter",
                    "Session prefetches not started: too few free L2 pages.");
  out << "flash_l3_prefetch_skipped_total " << e.l3_prefetch_skipped.load() << '\n';
  prometheus_header(
      out, "flash_l3_spill_failures_total", "counter",
      "L3 writes that failed (full disk, I/O error); those pages are recomputed when needed.");
  out << "flash_l3_spill_failures_total " << e.l3_spill_failures.load() << '\n';
  prometheus_header(out, "flash_l3_restores_total", "counter",
                    "Pages read back from L3 into L2 for a prompt.");
  out << "flash_l3_restores_total " << e.l3_restores.load() << '\n';
  prometheus_header(out, "flash_l3_lookup_pages_total", "counter",
                    "Prompt pages missing in L2 that were looked up in L3 (hit or not).");
  const uint64_t l3_lookups = e.l3_lookup_pages.load();
  out << "flash_l3_lookup_pages_total " << l3_lookups << '\n';
  prometheus_header(out, "flash_l3_hit_rate", "gauge",
                    "Pages restored from L3 over prompt pages missing in L2 (R-KV6).");
  out << "flash_l3_hit_rate "
      << (l3_lookups ? static_cast<double>(e.l3_restores.load()) / l3_lookups : 0.0) << '\n';
  prometheus_header(
      out, "flash_l3_recomputations_total", "counter",
      "Pages found in L3 but unusable (checksum, I/O error, timeout): recomputed (R-KV5).");
  out << "flash_l3_recomputations_total " << e.l3_recomputations.load() << '\n';
  prometheus_header(out, "flash_l3_dropped_total", "counter",
                    "Oldest L3 pages erased to make room when its capacity was used up.");
  out << "flash_l3_dropped_total " << e.l3_dropped.load() << '\n';
  prometheus_header(out, "flash_l3_pages", "gauge", "Pages stored in the L3 tier.");
  out << "flash_l3_pages " << e.l3_pages_stored.load() << '\n';
  prometheus_header(
      out, "k25_cached_tokens_total", "counter",
      "Prompt tokens whose KV was reused instead of computed, by the tier it came from.");
  out << "k25_cached_tokens_total{tier=\"l2\"} " << e.cached_tokens_l2.load() << '\n';
  out << "k25_cached_tokens_total{tier=\"disk\"} " << e.cached_tokens_disk.load() << '\n';
  out << "k25_cached_tokens_total{tier=\"redis\"} " << e.cached_tokens_shared.load() << '\n';
  if (e.shared_tier.load()) render_shared_tier_metrics(out, e);
  prometheus_header(
      out, "flash_l3_nvme_read_latency_p99", "gauge",
      "p99 of L3 page reads on the device (in the ring to completion), seconds (healthy < "
      "150 us on NVMe).");
  out << "flash_l3_nvme_read_latency_p99 " << e.l3_read_latency_p99_s.load() << '\n';
  prometheus_header(
      out, "k25_l3_read_queue_wait_p99_seconds", "gauge",
      "p99 of the wait of L3 page reads before they entered the ring (behind other requests).");
  out << "k25_l3_read_queue_wait_p99_seconds " << e.l3_read_queue_wait_p99_s.load() << '\n';
  prometheus_header(
      out, "k25_l3_errors_total", "counter",
      "L3 failures detected, by kind (the pages are recomputed, never served damaged).");
  out << "k25_l3_errors_total{kind=\"checksum\"} " << e.l3_checksum_failures.load() << '\n';
  out << "k25_l3_errors_total{kind=\"io\"} " << e.l3_io_errors.load() << '\n';
  out << "k25_l3_errors_total{kind=\"no_space\"} " << e.l3_no_space.load() << '\n';
  out << "k25_l3_errors_total{kind=\"journal\"} " << e.l3_journal_errors.load() << '\n';
  out << "k25_l3_errors_total{kind=\"file_lost\"} " << e.l3_files_lost.load() << '\n';
  prometheus_header(out, "k25_l3_writes_in_flight", "gauge",
                    "L3 page writes not acknowledged yet (a crash now loses only these).");
  out << "k25_l3_writes_in_flight " << e.l3_writes_in_flight.load() << '\n';
  prometheus_header(out, "k25_queue_timeouts_total", "counter",
                    "Requests that failed after waiting queue_timeout_s without starting.");
  out << "k25_queue_timeouts_total " << e.queue_timeouts.load() << '\n';
  prometheus_header(
      out, "k25_engine_step_failures_total", "counter",
      "Engine steps that failed with an exception of no one request (their requests failed).");
  out << "k25_engine_step_failures_total " << e.step_failures.load() << '\n';
  histogram(out, "k25_time_to_first_token_seconds", "Submit to first generated token.",
            e.ttft_seconds);
  histogram(out, "k25_inter_token_latency_seconds", "Time between consecutive tokens of a request.",
            e.inter_token_seconds);
  histogram(out, "k25_request_duration_seconds", "Submit to finish of generation requests.",
            e.request_seconds);
  histogram(out, "k25_step_seconds", "One engine step (its forward calls and sampling).",
            e.step_seconds);
  histogram(out, "k25_batch_sequences", "Sequences per engine step.", e.batch_sequences);
  histogram(out, "k25_batch_tokens", "Tokens per engine step.", e.batch_tokens);
  return out.str();
}

}  // namespace k25
