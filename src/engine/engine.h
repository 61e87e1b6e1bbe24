// The engine: one thread that owns the paged KV cache and the thread pool, takes generation
// requests from any thread and runs the elastic batcher (R-EB): each step the ElasticScheduler
// picks who runs (priorities, aging, preemption, the KV budget) and emits a task descriptor
// array; the tasks of one compute plan run as one forward call; the engine samples and reports
// token events through each request's callback. Full KV pages of finished sequences stay in a
// prefix cache (kv/prefix_cache.h) and new requests whose prompt starts the same way reuse them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/elastic_scheduler.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/step_budget_calibrator.h"
#include "engine/step_fault.h"
#include "flash/adaptive_pruning.h"
#include "kv/free_page_reserve.h"
#include "kv/l1_window_cache.h"
#include "kv/l3_prefix_tier.h"
#include "kv/paged_kv_cache.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_restore.h"
#include "kv/redis_prefix_tier.h"
#include "kv/session_prefetcher.h"
#include "model/grammar_vocabulary.h"
#include "model/model.h"

namespace k25 {

struct EngineOptions {
  int n_threads = 0;               // <= 0: hardware concurrency
  int max_batch_size = 24;         // concurrent sequences (KV slots), R-EB4
  int max_queue = 256;             // waiting requests before submit() answers QueueFull
  int context_size = 0;            // <= 0 or above the model's: the model's context_length
  int step_token_budget = 512;     // tokens per step (decode tokens + prefill micro-tasks), R-EB2
  int micro_task_tokens = 128;     // prefill chunk, R-EB2
  double aging_per_second = 10;    // priority points a request gains per second it waits
  int preempt_min_priority = 100;  // arrivals with this base priority or more may preempt (gold)
  // L2 KV pool budget (R-KV1). 0: enough for max_batch_size sequences of the full context.
  size_t kv_budget_bytes = 0;
  int kv_page_tokens = PagedKvCache::kDefaultPageTokens;
  // Element type of the stored K and V rows (kv_cache_dtype): f16 halves the bytes per token.
  KvDtype kv_dtype = KvDtype::kF32;
  // L1 (l1_cache_size): a ring of each sequence's newest positions that attention reads first
  // (kv/l1_window_cache.h). 0: off (measured no faster here, docs/kv-cache.md).
  int l1_window = 0;
  // Keep full KV pages of finished sequences for prompts with the same prefix (R-KV4).
  bool prefix_cache = true;
  // L3 behind the prefix cache (a DiskStore directory or file; "" = none): pages evicted from
  // L2, and all cached pages at shutdown, are written there and read back for later prompts,
  // also after a restart. Needs prefix_cache. When the store cannot be opened the engine warns
  // and runs without it (l3_active()).
  std::string l3_path;
  uint64_t l3_capacity_bytes = uint64_t{1} << 30;
  uint32_t l3_page_size = 4096;
  uint64_t l3_content_tag = 0;  // names the model (e.g. a hash of its file); KV of another is
                                // never reused
  // Cached pages that no request has used for this long move from L2 to L3 (R-KV2: a session
  // gone quiet gives its RAM back). <= 0: only when L2 needs room.
  double l3_idle_seconds = 60;
  // With L3: sessions whose turns came 3 times have their pages read back from L3 into free L2
  // shortly before their predicted next turn (kv/session_prefetcher.h; l3_prefetcher: lru-k).
  bool l3_session_prefetch = true;
  // What the L3 tier is (flash_scheduler.l3_backend): the disk at l3_path, a Redis shared by
  // replicas (kv/redis_prefix_tier.h), or both, the disk in front. With Redis, `redis` says where
  // (its kv_namespace is filled in by the engine from shared_weights_hash and the KV geometry).
  enum class L3Backend { kDisk, kRedis, kDiskAndRedis };
  L3Backend l3_backend = L3Backend::kDisk;
  RedisTierOptions redis;
  uint64_t shared_weights_hash = 0;  // weights_content_hash() of the model file
  int batch_timeout_ms = 10;         // an idle engine waits this long for more arrivals (R-EB4)
  int queue_timeout_ms = 0;          // a request never started after this long fails; 0 = no limit
  // Testing aid: sleep this long before every forward call (makes the engine slow on purpose,
  // e.g. to exercise the server's fallback circuit breaker). 0 = off.
  int debug_step_delay_ms = 0;
  // Testing aid: an exception thrown inside a step (engine/step_fault.h has the spec), to show
  // that a failing step fails only the requests it belongs to. "" = off.
  std::string debug_fault;
  // Budget share of a token's position (SchedulerOptions::position_cost); < 0: estimated from
  // the model's shape (engine/step_cost.h), 0: plain token counts.
  double position_cost = -1;
  // > 0: the step's token budget and position cost are measured while serving
  // (engine/step_budget_calibrator.h) so a step takes about this long on this machine; the two
  // values above are then only the starting point. 0: they are used as given.
  double target_step_ms = 0;
  // Speculative decoding (engine/speculation.h), for the requests that ask for it.
  SpeculationOptions speculation;
};

enum class SubmitStatus { Accepted, QueueFull, ShuttingDown, Invalid };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::Accepted;
  RequestId id = 0;
  std::string message;  // why, when not accepted
};

class Engine {
 public:
  // `model` must outlive the engine, and no other engine may run it at the same time (the forward
  // pass keeps its scratch buffers in the model). Starts the engine thread.
  Engine(Model& model, EngineOptions options);
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
  size_t kv_budget_bytes() const { return kv_->bytes_budget(); }
  int kv_page_tokens() const { return options_.kv_page_tokens; }
  bool l3_active() const { return l3_ != nullptr; }

 private:
  struct Sequence;
  using Clock = std::chrono::steady_clock;

  void run();
  void wait_for_work();
  void take_submissions();
  void apply_cancellations();
  void expire_queued();
  void step();
  // The phases of step(), in order.
  struct ScheduledStep {
    Clock::time_point now;
    std::vector<Sequence*> live;  // the sequences the scheduler saw, indexed by its decision
    StepDecision decision;
  };
  void advance_kv_tiers();     // L3: completions collected, restores ended, idle pages spilled
  void map_cached_prefixes();  // queued prompts: cached pages mapped, L3 reads started
  // Waits a moment for the shared tier's answers to probes just started; true if it waited.
  bool await_new_probes();
  std::optional<ScheduledStep> schedule(Clock::time_point now);  // nullopt: nothing to schedule
  void make_resident(const ScheduledStep& s);  // drops, preemptions, admissions, KV slots
  void admit(Sequence& seq, Clock::time_point now);
  // No task fits although sequences run: the top one fails (or ends at its length).
  void handle_unschedulable(const std::vector<Sequence*>& live);
  void run_tasks(
      const ScheduledStep& s);  // one forward call, whatever the plans (embeddings apart)
  // Feeds a finished step's time to the calibrator and applies the step cost it measures.
  void recalibrate(int n_tokens, double positions, double step_ms);
  // The calibrator's current step cost, when it has one, to the scheduler and the stats.
  void apply_calibration();
  // One forward call over the tasks' tokens, each under its sequence's plan.
  void run_group(const std::vector<std::pair<Sequence*, TaskDescriptor>>& group);
  void on_logits(Sequence& seq, float* logits);
  // Adds the positions a forward call computed for `seq` (`full_model`: without a plan).
  void count_computed(Sequence& seq, int n, bool full_model);
  // Self-speculation: up to k tokens the sequence's draft plan proposes greedily, one forward call
  // each; their K/V rows stay the draft plan's until this step's call writes them again.
  std::vector<TokenId> self_draft(Sequence& seq, int k);
  // Speculative decoding (engine/speculation.h). Before a step's forward calls: whether it
  // drafts, and the free KV pages its drafts may take (none that its tasks need).
  void plan_drafts(const StepDecision& decision, const std::vector<Sequence*>& live);
  // Appends a draft after a decoding sequence's last token to the batch, one logits row each.
  void add_draft(Sequence& seq, const TaskDescriptor& task, std::vector<BatchToken>& batch,
                 std::vector<Sequence*>& wanting_logits);
  // Samples from the sequence's logits rows (1 + its draft) while the draft holds, then rolls
  // the KV of the rejected draft rows back.
  void sample_rows(Sequence& seq, float* logits);
  void finish(Sequence& seq, FinishReason reason, std::string error = {});
  // The exception barrier. An exception of one request's part of a step fails that request
  // (its KV is released, never cached: it may be half-written); one that belongs to no request
  // fails the step's requests: those running, or every one when none was running yet.
  void fail_after_exception(Sequence& seq, const std::string& what);
  void fail_step(const std::string& what);
  // Releases the sequence's KV (its full pages go to the prefix cache); `preempted`: also
  // write them to L3 right away (R-KV2), as the sequence will want them back.
  void drop_kv(Sequence& seq, bool preempted = false);
  // Releases the sequence's KV without caching any of it (when caching it failed).
  void discard_kv(Sequence& seq);
  // Moves cached pages idle for options_.l3_idle_seconds to L3 and releases the memory of free
  // pages, every idle_spill_interval(): a quarter of l3_idle_seconds, at most a second.
  void spill_idle_pages(Clock::time_point now);
  Clock::duration l3_idle() const;  // options_.l3_idle_seconds
  Clock::duration idle_spill_interval() const;
  // Maps the cached pages of the longest matching prefix of a sequence without KV. When L3
  // holds pages past those in L2 and `may_read_l3`, starts reading them instead (the sequence
  // waits, unscheduled, until collect_l3_restores() ends the restore); without `may_read_l3`
  // the sequence waits, unscheduled, for a step where it may.
  void reuse_prefix(Sequence& seq, bool may_read_l3);
  // Gives the sequence `pages` (cached, in position order) as its first positions.
  void adopt_prefix(Sequence& seq, const std::vector<PageId>& pages);
  // Starts reading the chain's pages [l2_pages.size(), n_pages) that L3 holds into fresh L2
  // pages (ended at once when the tier has them in memory); false (nothing started) when there is
  // no page to read into.
  bool begin_l3_restore(Sequence& seq, const std::vector<PageId>& l2_pages, size_t n_pages);
  // Ends the sequence's restore: the restored pages join the prefix cache and, unless the
  // sequence finished meanwhile, its page table; the rest is recomputed.
  void end_l3_restore(Sequence& seq);
  // Session prefetch (R-KV3): a finished turn of a session is recorded; hot sessions' pages are
  // read back from L3 into free L2 pages prefetch_lead() before their predicted next turn.
  struct SessionFetch {
    SessionPrefetcher::Chain chain;  // owns the keys and tokens the restore points into
    std::optional<PrefixRestore> restore;
  };
  void record_session_turn(const Sequence& seq);
  void prefetch_sessions(Clock::time_point now);
  // Ends the fetches whose reads are done (all of them with `all`, at shutdown).
  void end_session_fetches(Clock::time_point now, bool all);
  bool page_being_fetched(uint64_t key) const;
  PrefixRestore::Chain fetch_chain(const SessionFetch& fetch) const;
  Clock::duration prefetch_lead() const;
  // How long an idle engine thread sleeps before a step of its own (spills, prefetches).
  Clock::duration idle_wait() const;
  // The first n_pages pages of the sequence's tokens and their chained keys.
  PrefixRestore::Chain prefix_chain(const Sequence& seq, size_t n_pages) const;
  // Ends the restores whose reads completed or whose time is up.
  void collect_l3_restores(Clock::time_point now);
  void open_l3();
  std::unique_ptr<PrefixTier> open_disk_tier();  // null (with a warning) when it cannot open
  // Writes the full pages of a finished sequence to a shared tier at once (a no-op for the disk).
  void write_through(const Sequence& seq);
  void publish_shared_stats(const SharedTierStats& s);
  // Offers the sequence's full pages computed by the full model to the prefix cache.
  void publish_prefix(Sequence& seq);
  int take_kv_id();
  // What the forward pass reads and writes: the L1 ring over the pages, or the pages.
  KvCache& forward_cache() { return l1_ ? static_cast<KvCache&>(*l1_) : *kv_; }
  // Leading pages of the sequence's table that another running or queued sequence also maps.
  int pages_shared_with_others(const Sequence& seq) const;
  void release_finished();
  void publish_stats();

  Model& model_;
  LazyGrammarVocabulary grammar_vocabulary_;  // built for the first request with a grammar
  EngineOptions options_;
  int context_size_;
  ElasticScheduler scheduler_;
  std::optional<StepBudgetCalibrator> calibrator_;  // set when target_step_ms > 0
  AdaptivePruner pruner_;
  std::shared_ptr<const Drafter> drafter_;
  std::shared_ptr<const ComputePlan> self_draft_plan_;  // for self-speculation without a plan
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<L1WindowKvCache> l1_;  // null when off; after kv_ (it writes through to it)
  std::unique_ptr<PrefixCache> prefix_;  // null when options_.prefix_cache is off; after kv_
  std::optional<SessionPrefetcher> session_prefetcher_;  // with L3 and l3_session_prefetch
  std::vector<SessionFetch> session_fetches_;
  uint64_t prefetched_from_disk_ = 0;  // pages the session fetches read from the disk tier
  std::unique_ptr<PrefixTier> l3_;     // null without L3; after prefix_ (saves its pages)
  EngineStats stats_;

  mutable std::mutex mutex_;  // guards the fields below up to the thread
  std::condition_variable wake_;
  bool stopping_ = false;
  RequestId next_id_ = 1;
  std::deque<std::unique_ptr<Sequence>> submitted_;  // not yet seen by the engine thread
  std::unordered_set<RequestId> cancel_requests_;
  bool cancel_everything_ = false;
  int n_queued_shared_ = 0;  // sequences without a batch slot (submitted or queued)
  int n_running_shared_ = 0;

  // Engine thread only.
  std::vector<std::unique_ptr<Sequence>> seqs_;  // running and queued, in arrival order
  std::vector<int> free_kv_ids_;
  int next_kv_id_ = 0;
  std::vector<float> logits_;
  std::vector<float> hidden_;  // final hidden states of embedding requests' tokens
  Clock::time_point next_idle_spill_{};
  FreePageReserve free_page_reserve_;
  StepFaultInjector fault_;
  uint64_t n_steps_ = 0;   // steps that ran a forward call
  bool drafting_ = false;  // this step drafts (plan_drafts)
  long draft_pages_ = 0;   // free KV pages this step's drafts may still take
  std::thread thread_;
};

}  // namespace k25
