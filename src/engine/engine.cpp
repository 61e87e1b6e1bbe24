#include "engine/engine.h"

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "engine/step_cost.h"
#include "kv/shared_kv_namespace.h"
#include "kv/stacked_prefix_tier.h"
#include "model/grammar_sampling.h"
#include "model/kv_cache.h"

namespace k25 {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "error";
}

struct Engine::Sequence {
  Sequence(RequestId id_, GenerationRequest request_, EventCallback on_event_, int n_vocab, int dim,
           const SpeculationOptions& speculation)
      : id(id_),
        request(std::move(request_)),
        on_event(std::move(on_event_)),
        sampler(request.sampling, n_vocab),
        stop_matcher(request.stop),
        tokens(request.prompt),
        submitted(Clock::now()),
        queued_since(submitted),
        draft_length(speculation) {
    if (request.embedding) pooler.emplace(*request.embedding, dim);
  }

  RequestId id;
  GenerationRequest request;
  EventCallback on_event;
  Sampler sampler;
  std::optional<GrammarMatcher> grammar;  // when the request has one
  StopMatcher stop_matcher;
  Utf8StreamDecoder utf8;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  int n_computed = 0;           // tokens whose K/V are in the cache
  int n_generated = 0;
  int kv_id = -1;  // sequence id in the KV cache while it holds pages or runs
  bool running = false;
  bool started = false;  // ran at least once (queue timeouts apply before that only)
  bool queue_timeout = false;
  bool finished = false;
  bool stop_string_matched = false;  // the output already ends just before a stop string
  std::string matched_stop;          // that stop string
  bool has_first_token = false;
  int max_computed = 0;  // positions ever computed (what a recompute repeats)
  // Positions [0, full_model_computed) of the KV were computed by the full model (no compute
  // plan), so their pages may be shared through the prefix cache.
  int full_model_computed = 0;
  int cached_tokens = 0;              // prompt tokens reused from the prefix cache at admission
  std::vector<uint64_t> prefix_keys;  // chained page keys of `tokens`, extended as needed
  // Pages of the prompt's prefix being read from L3 (R-KV2): the sequence is not scheduled until
  // the reads complete (or time out), while the others keep computing. `restore_l2`: the
  // prefix's leading pages found in L2, pinned meanwhile; `restore_chain`: the pages after them,
  // fresh L2 pages the reads fill.
  std::optional<L3RestoreId> restore;
  std::vector<PageId> restore_l2;
  std::vector<CachedPage> restore_chain;
  Clock::time_point restore_deadline;
  bool l3_asked = false;  // the prompt's pages missing in L2 were looked up in L3
  // The shared tier is being asked which of the prompt's pages it holds (at most once per
  // sequence); unscheduled meanwhile, until the answer or probe_deadline.
  std::optional<TierProbeId> probe;
  Clock::time_point probe_deadline;
  bool l3_probed = false;
  // Of n_computed, positions restored from the disk / shared tier (the rest came from L2).
  int restored_disk_tokens = 0;
  int restored_shared_tokens = 0;
  // Queued while L3 holds more of its prompt than L2 and no read may start yet (no free batch
  // slot): not scheduled this step, so that it reads those pages later instead of computing them.
  bool awaiting_l3 = false;
  Clock::time_point submitted;
  Clock::time_point queued_since;  // submitted, or preempted last (aging while queued)
  Clock::time_point last_served;   // admitted or given a task last (aging while running)
  Clock::time_point last_token;
  double ttft_ms = 0;
  // Embedding requests: takes the final hidden states as the prompt's positions are computed.
  std::optional<EmbeddingPooler> pooler;

  std::shared_ptr<const ComputePlan> current_plan = request.plan;  // Level 3 may change it
  AdaptiveState adaptive;

  // Speculative decoding: k of the next draft, this step's draft and the counts so far.
  DraftLength draft_length;
  std::vector<TokenId> draft;
  int drafted_tokens = 0;
  int accepted_tokens = 0;

  // The compute plan (R-PR1), or null for the whole model (a full plan counts as none).
  const ComputePlan* plan() const {
    return current_plan && !current_plan->is_full() ? current_plan.get() : nullptr;
  }
};

namespace {
double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int resolve_context(const Model& model, const EngineOptions& o) {
  const int model_context = model.config().context_length;
  return o.context_size <= 0 ? model_context : std::min(o.context_size, model_context);
}

SchedulerOptions scheduler_options(const EngineOptions& o, const ModelConfig& config) {
  SchedulerOptions s;
  s.max_batch_size = o.max_batch_size;
  s.step_token_budget = o.step_token_budget;
  s.position_cost = o.position_cost < 0 ? estimated_position_cost(config) : o.position_cost;
  s.micro_task_tokens = o.micro_task_tokens;
  s.aging_per_second = o.aging_per_second;
  s.preempt_min_priority = o.preempt_min_priority;
  return s;
}
}  // namespace

Engine::Engine(Model& model, EngineOptions options)
    : model_(model),
      options_(options),
      context_size_(resolve_context(model, options)),
      scheduler_(scheduler_options(options, model.config())),
      pruner_(model.config(), AdaptiveOptions{}),
      drafter_(options.speculation.drafter ? options.speculation.drafter
                                           : std::make_shared<NgramDrafter>()),
      fault_(parse_step_fault(options.debug_fault)) {
  validate(options_.speculation);
  if (options_.max_queue < 0) fail("engine: max_queue must be >= 0");
  if (context_size_ < 2) fail("engine: context size ", context_size_, " is too small");
  if (options_.kv_page_tokens < 1) fail("engine: kv_page_tokens must be >= 1");
  if (!(options_.target_step_ms >= 0)) fail("engine: target_step_ms must be >= 0");
  if (options_.target_step_ms > 0) {
    CalibratorOptions calibration;
    calibration.target_step_ms = options_.target_step_ms;
    calibration.prior_position_cost = scheduler_.options().position_cost;
    calibrator_.emplace(calibration);
  }
  stats_.step_token_budget = scheduler_.options().step_token_budget;
  stats_.step_position_cost = scheduler_.options().position_cost;
  const ModelConfig& c = model_.config();
  const int kv_dim = c.n_kv_heads * c.head_dim;
  size_t budget = options_.kv_budget_bytes;
  if (budget == 0) {
    const size_t pages_per_seq =
        (static_cast<size_t>(context_size_) + options_.kv_page_tokens - 1) /
        options_.kv_page_tokens;
    budget =
        PagePool::page_bytes_for({options_.kv_page_tokens, c.n_layers, kv_dim, options_.kv_dtype}) *
        pages_per_seq * static_cast<size_t>(options_.max_batch_size);
  }
  kv_ = std::make_unique<PagedKvCache>(c.n_layers, kv_dim, context_size_, budget,
                                       options_.kv_page_tokens, options_.kv_dtype);
  if (kv_->pool().pages_total() == 0) {
    fail("engine: a KV budget of ", budget, " bytes holds no page (one page is ",
         kv_->pool().page_bytes(), " bytes)");
  }
  stats_.kv_pages_total = kv_->pool().pages_total();
  if (options_.l1_window > 0) {
    l1_ = std::make_unique<L1WindowKvCache>(*kv_, c.n_layers, kv_dim, options_.l1_window);
  }
  if (options_.prefix_cache) {
    // The seed names the KV geometry; keys only have to agree within one pool.
    const uint64_t seed = (static_cast<uint64_t>(c.n_layers) << 48) ^
                          (static_cast<uint64_t>(kv_dim) << 24) ^
                          static_cast<uint64_t>(options_.kv_page_tokens);
    prefix_ = std::make_unique<PrefixCache>(kv_->pool(), seed);
    kv_->set_reclaimer(prefix_.get());
  }
  if (!options_.l3_path.empty() || options_.l3_backend != EngineOptions::L3Backend::kDisk) {
    open_l3();
  }
  int n_threads = options_.n_threads > 0 ? options_.n_threads
                                         : static_cast<int>(std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(std::max(1, n_threads));
  publish_stats();  // /metrics shows the tiers as opened (L3 pages kept from earlier runs) at once
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  shutdown();
  if (l3_) {
    // Everything still cached goes to L3 too, so a restarted engine finds it (R-KV4).
    // Bounded in flight: each write holds a staging copy of its page until it completes.
    prefix_->for_each_page([this](const CachedPage& page) {
      l3_->spill(page);
      l3_->limit_in_flight(64);
    });
    l3_.reset();  // waits for the writes and saves the index, while the pool still exists
  }
  kv_->set_reclaimer(nullptr);
}

void Engine::open_l3() {
  if (!prefix_) {
    std::cerr << "warning: L3 KV tier off: it needs the prefix cache\n";
    return;
  }
  using Backend = EngineOptions::L3Backend;
  std::unique_ptr<PrefixTier> disk, shared;
  if (options_.l3_backend != Backend::kRedis) {
    disk = open_disk_tier();
    if (!disk) return;
  }
  if (options_.l3_backend != Backend::kDisk) {
    const ModelConfig& c = model_.config();
    RedisTierOptions o = options_.redis;
    o.kv_namespace =
        shared_kv_namespace({options_.shared_weights_hash, prefix_->root_key(),
                             static_cast<int>(options_.kv_dtype), c.n_vocab, c.dim, c.n_heads});
    try {
      shared = std::make_unique<RedisPrefixTier>(o, kv_->pool());
    } catch (const std::exception& e) {
      std::cerr << "warning: shared KV tier off: " << e.what() << "\n";
    }
  }
  if (disk && shared) {
    l3_ = std::make_unique<StackedPrefixTier>(std::move(disk), std::move(shared));
  } else {
    l3_ = disk ? std::move(disk) : std::move(shared);
  }
  if (l3_) prefix_->set_evict_hook([this](const CachedPage& page) { l3_->spill(page); });
}

std::unique_ptr<PrefixTier> Engine::open_disk_tier() {
  const ModelConfig& c = model_.config();
  DiskStoreOptions o;
  o.path = options_.l3_path;
  o.capacity_bytes = options_.l3_capacity_bytes;
  o.page_size = options_.l3_page_size;
  // Pages of another model or KV geometry must never be read back: the store starts empty when
  // its index carries another tag.
  uint64_t tag = options_.l3_content_tag;
  const auto mix = [&tag](uint64_t v) {
    tag = (tag ^ v) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  };
  for (uint64_t v : {prefix_->root_key(), static_cast<uint64_t>(c.n_vocab),
                     static_cast<uint64_t>(c.dim), static_cast<uint64_t>(c.n_heads)}) {
    mix(v);
  }
  // The rows' element type: f16 pages are never read as f32 or back. Only mixed in for f16, so
  // the f32 stores written before the dtype existed keep their tag.
  if (options_.kv_dtype != KvDtype::kF32) mix(static_cast<uint64_t>(options_.kv_dtype));
  o.content_tag = tag;
  try {
    return std::make_unique<L3PrefixTier>(o, kv_->pool());
  } catch (const std::exception& e) {
    std::cerr << "warning: L3 KV tier off: " << e.what() << "\n";
    return nullptr;
  }
}

SubmitResult Engine::submit(GenerationRequest request, EventCallback on_event) {
  SubmitResult result;
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) {
    return {SubmitStatus::Invalid, 0, "the prompt has no tokens"};
  }
  const bool embedding = request.embedding.has_value();
  if (embedding && n_prompt > context_size_) {
    return {SubmitStatus::Invalid, 0,
            concat("the input has ", n_prompt, " tokens; the context holds ", context_size_)};
  }
  if (!embedding && n_prompt >= context_size_) {
    return {SubmitStatus::Invalid, 0,
            concat("the prompt has ", n_prompt, " tokens; the context holds ", context_size_,
                   " (prompt and at least one generated token)")};
  }
  if (embedding && ((request.plan && !request.plan->is_full()) || request.adaptive_pruning)) {
    return {SubmitStatus::Invalid, 0, "an embedding request runs the whole model (no pruning)"};
  }
  // The prompt's positions and a generated token's (none for an embedding).
  const int n_positions = n_prompt + (embedding ? 0 : 1);
  const size_t prompt_pages =
      static_cast<size_t>(n_positions + options_.kv_page_tokens - 1) / options_.kv_page_tokens;
  if (prompt_pages > kv_->pool().pages_total()) {
    return {SubmitStatus::Invalid, 0,
            concat("the prompt has ", n_prompt, " tokens; the KV budget (", kv_->bytes_budget(),
                   " bytes) holds ", kv_->pool().pages_total() * options_.kv_page_tokens,
                   " positions")};
  }
  if (!embedding && request.max_tokens < 1)
    return {SubmitStatus::Invalid, 0, "max_tokens must be >= 1"};
  const int n_vocab = model_.config().n_vocab;
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= n_vocab) {
      return {SubmitStatus::Invalid, 0, concat("prompt token ", t, " is outside the vocabulary")};
    }
  }
  std::unique_ptr<Sequence> seq;
  try {
    seq = std::make_unique<Sequence>(0, std::move(request), std::move(on_event), n_vocab,
                                     model_.config().dim, options_.speculation);
    if (seq->request.grammar) {
      std::vector<TokenId> end_tokens = seq->request.stop_tokens;
      if (!seq->request.ignore_eos) {
        const auto& eog = grammar_vocabulary_.get(model_.tokenizer())->end_of_generation();
        end_tokens.insert(end_tokens.end(), eog.begin(), eog.end());
      }
      seq->grammar.emplace(seq->request.grammar, grammar_vocabulary_.get(model_.tokenizer()),
                           std::move(end_tokens));
    }
  } catch (const Error& e) {
    return {SubmitStatus::Invalid, 0, e.what()};
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return {SubmitStatus::ShuttingDown, 0, "the engine is shutting down"};
    // Free batch slots take requests at the next step, so they count as room besides the queue.
    const int capacity = options_.max_queue + options_.max_batch_size - n_running_shared_;
    if (n_queued_shared_ >= capacity) {
      return {SubmitStatus::QueueFull, 0,
              concat("the queue is full (", options_.max_queue, " requests waiting)")};
    }
    seq->id = next_id_++;
    result.id = seq->id;
    submitted_.push_back(std::move(seq));
    ++n_queued_shared_;
    stats_.requests_waiting = n_queued_shared_;
  }
  wake_.notify_one();
  return result;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancel_requests_.insert(id);
  }
  wake_.notify_one();
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_everything_ = true;
  }
  wake_.notify_one();
}

void Engine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Engine::n_active() const {
  std::lock_guard lock(mutex_);
  return n_queued_shared_ + n_running_shared_;
}

void Engine::run() {
  for (;;) {
    wait_for_work();
    bool stop = false;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        cancel_everything_ = true;
        stop = true;
      }
    }
    // The exception barrier: nothing that goes wrong in a step (out of memory, a bug) may end
    // the engine thread, which would take every request down (std::terminate).
    try {
      take_submissions();
      apply_cancellations();
      if (!stop) {
        expire_queued();
        step();
      }
    } catch (const std::exception& e) {
      fail_step(e.what());
    } catch (...) {
      fail_step("unknown exception");
    }
    release_finished();
    if (stop) return;
  }
}

void Engine::fail_after_exception(Sequence& seq, const std::string& what) {
  seq.full_model_computed = 0;  // so none of its KV is cached or written to L3
  finish(seq, FinishReason::Error, concat("internal error: ", what));
}

void Engine::fail_step(const std::string& what) {
  ++stats_.step_failures;
  std::cerr << "error: an engine step failed (" << what << "); its requests fail\n";
  bool any_running = false;
  for (const auto& seq : seqs_) any_running |= seq->running && !seq->finished;
  for (auto& seq : seqs_) {
    if (!seq->finished && (seq->running || !any_running)) fail_after_exception(*seq, what);
  }
}

void Engine::wait_for_work() {
  std::unique_lock lock(mutex_);
  auto interrupted = [&] { return stopping_ || cancel_everything_ || !cancel_requests_.empty(); };
  if (seqs_.empty()) {
    const auto woken = [&] { return interrupted() || !submitted_.empty(); };
    if (l3_ && options_.l3_idle_seconds > 0) {
      // Idle, but cached KV may go quiet and move to L3: a step (with no sequence) does that.
      if (!wake_.wait_for(lock, idle_spill_interval(), woken)) return;
    } else {
      wake_.wait(lock, woken);
    }
    // Idle until now: give simultaneous arrivals a moment to share the first step (R-EB4).
    const auto deadline = Clock::now() + std::chrono::milliseconds(options_.batch_timeout_ms);
    wake_.wait_until(lock, deadline, [&] {
      return interrupted() || static_cast<int>(submitted_.size()) >= options_.max_batch_size;
    });
  }
}

void Engine::take_submissions() {
  std::lock_guard lock(mutex_);
  while (!submitted_.empty()) {
    seqs_.push_back(std::move(submitted_.front()));
    submitted_.pop_front();
  }
}

void Engine::apply_cancellations() {
  std::unordered_set<RequestId> ids;
  bool everything = false;
  {
    std::lock_guard lock(mutex_);
    ids.swap(cancel_requests_);
    everything = cancel_everything_;
    cancel_everything_ = false;
  }
  if (!everything && ids.empty()) return;
  for (auto& seq : seqs_) {
    if (everything || ids.count(seq->id)) finish(*seq, FinishReason::Cancelled);
  }
}

void Engine::expire_queued() {
  if (options_.queue_timeout_ms <= 0) return;
  const Clock::time_point now = Clock::now();
  for (auto& seq : seqs_) {
    if (seq->started || seq->finished) continue;
    if (ms_between(seq->submitted, now) > options_.queue_timeout_ms) {
      ++stats_.queue_timeouts;
      seq->queue_timeout = true;
      finish(*seq, FinishReason::Error,
             concat("timed out after ", options_.queue_timeout_ms, " ms waiting in the queue"));
    }
  }
}

void Engine::drop_kv(Sequence& seq, bool preempted) {
  if (seq.kv_id < 0) return;
  publish_prefix(seq);
  if (preempted && l3_ && !seq.plan()) {
    const std::vector<PageId>& pages = kv_->page_table(seq.kv_id);
    const size_t n_pages = std::min(seq.prefix_keys.size(), pages.size());
    for (size_t i = 0; i < n_pages && prefix_->holds_page(pages[i]); ++i) {
      const uint64_t parent = i ? seq.prefix_keys[i - 1] : prefix_->root_key();
      l3_->spill({seq.prefix_keys[i], parent,
                  seq.tokens.data() + i * static_cast<size_t>(options_.kv_page_tokens), pages[i]});
    }
  }
  if (!preempted && l3_ && !seq.plan()) write_through(seq);
  forward_cache().clear(seq.kv_id);  // through L1, whose ring must go too
  free_kv_ids_.push_back(seq.kv_id);
  seq.kv_id = -1;
  seq.n_computed = 0;
  seq.full_model_computed = 0;
}

void Engine::discard_kv(Sequence& seq) {
  if (seq.kv_id < 0) return;
  forward_cache().clear(seq.kv_id);
  free_kv_ids_.push_back(seq.kv_id);  // no allocation: take_kv_id() made room
  seq.kv_id = -1;
  seq.n_computed = 0;
  seq.full_model_computed = 0;
}

int Engine::take_kv_id() {
  if (free_kv_ids_.empty()) {
    // Room for every id, so that giving one back never allocates (discard_kv under OOM).
    free_kv_ids_.reserve(static_cast<size_t>(next_kv_id_) + 1);
    free_kv_ids_.push_back(next_kv_id_++);
  }
  const int id = free_kv_ids_.back();
  free_kv_ids_.pop_back();
  return id;
}

void Engine::publish_prefix(Sequence& seq) {
  if (!prefix_) return;
  const size_t n_pages = static_cast<size_t>(seq.full_model_computed / options_.kv_page_tokens);
  if (n_pages == 0) return;
  prefix_->chain_keys(seq.tokens.data(), n_pages, &seq.prefix_keys);
  prefix_->insert(seq.prefix_keys.data(), n_pages, seq.tokens.data(), kv_->page_table(seq.kv_id),
                  !seq.request.session_id.empty());
}

void Engine::write_through(const Sequence& seq) {
  const std::vector<PageId>& pages = kv_->page_table(seq.kv_id);
  const size_t n_pages =
      std::min({seq.prefix_keys.size(), pages.size(),
                static_cast<size_t>(seq.full_model_computed / options_.kv_page_tokens)});
  for (size_t i = 0; i < n_pages; ++i) {
    const uint64_t parent = i ? seq.prefix_keys[i - 1] : prefix_->root_key();
    l3_->write_through({seq.prefix_keys[i], parent,
                        seq.tokens.data() + i * static_cast<size_t>(options_.kv_page_tokens),
                        pages[i]});
  }
}

bool Engine::probing_shared_tier(Sequence& seq, size_t first_missing, size_t n_pages) {
  if (seq.probe) {
    if (!l3_->probe_done(*seq.probe) && Clock::now() < seq.probe_deadline) return true;
    seq.probe.reset();
    return false;
  }
  if (seq.l3_probed || l3_->contains(seq.prefix_keys[first_missing])) return false;
  seq.l3_probed = true;
  const TierProbeId id =
      l3_->probe(seq.prefix_keys.data() + first_missing, n_pages - first_missing);
  if (id == 0 || l3_->probe_done(id)) return false;
  seq.probe = id;
  seq.probe_deadline = Clock::now() + l3_->read_timeout();
  return true;
}

void Engine::reuse_prefix(Sequence& seq, bool may_read_l3) {
  // Only KV of the full model is shared, and the last known token is always computed (its
  // logits give the next token), so at most (tokens - 1) positions, in whole pages, are reused;
  // a sequence never writes into a page it shares.
  seq.awaiting_l3 = false;
  // An embedding pools the hidden states of every position, so it computes them all (its
  // pages still go to the prefix cache when it finishes: they are the full model's KV).
  if (seq.pooler) return;
  if (!prefix_ || seq.plan() || seq.kv_id >= 0 || seq.restore) return;
  const size_t n_pages = (seq.tokens.size() - 1) / options_.kv_page_tokens;
  if (n_pages == 0) return;
  prefix_->chain_keys(seq.tokens.data(), n_pages, &seq.prefix_keys);
  std::vector<PageId> pages = prefix_->lookup(seq.prefix_keys.data(), n_pages, seq.tokens.data());
  if (may_read_l3 && l3_ && !seq.l3_asked) {
    seq.l3_asked = true;  // the L3 hit rate's denominator counts a prompt once
    stats_.l3_lookup_pages += n_pages - pages.size();
  }
  if (l3_ && pages.size() < n_pages && probing_shared_tier(seq, pages.size(), n_pages)) {
    seq.awaiting_l3 = true;  // not scheduled until the shared tier answers (or times out)
    return;
  }
  if (l3_ && pages.size() < n_pages && l3_->contains(seq.prefix_keys[pages.size()])) {
    // Mapping the L2 part now would commit the sequence to computing the rest.
    if (!may_read_l3) {
      seq.awaiting_l3 = true;
      return;
    }
    if (begin_l3_restore(seq, pages, n_pages)) return;
  }
  adopt_prefix(seq, pages);
}

void Engine::adopt_prefix(Sequence& seq, const std::vector<PageId>& pages) {
  if (pages.empty()) return;
  seq.kv_id = take_kv_id();
  kv_->adopt(seq.kv_id, pages);
  seq.n_computed = static_cast<int>(pages.size()) * options_.kv_page_tokens;
  seq.full_model_computed = seq.n_computed;
}

bool Engine::begin_l3_restore(Sequence& seq, const std::vector<PageId>& l2_pages, size_t n_pages) {
  PagePool& pool = kv_->pool();
  for (PageId page : l2_pages) pool.retain(page);  // not evictable while the rest is read
  const int page_tokens = options_.kv_page_tokens;
  const std::vector<uint64_t>& keys = seq.prefix_keys;
  std::vector<CachedPage> chain;  // fresh L2 pages for the chain's pages that L3 holds
  for (size_t i = l2_pages.size(); i < n_pages && l3_->contains(keys[i]); ++i) {
    std::optional<PageId> page = pool.allocate();
    while (!page && prefix_->reclaim_one()) page = pool.allocate();
    if (!page) break;
    chain.push_back({keys[i], i ? keys[i - 1] : prefix_->root_key(),
                     seq.tokens.data() + i * page_tokens, *page});
  }
  if (chain.empty()) {
    for (PageId page : l2_pages) pool.free(page);
    return false;
  }
  seq.restore_l2 = l2_pages;
  seq.restore_chain = chain;
  seq.restore = l3_->begin_restore(std::move(chain));
  seq.restore_deadline = Clock::now() + l3_->read_timeout();
  return true;
}

void Engine::end_l3_restore(Sequence& seq) {
  std::vector<bool> kept;
  const RestoredPages restored_pages = l3_->end_restore(*seq.restore, &kept);
  const size_t restored = restored_pages.total;
  seq.restore.reset();
  PagePool& pool = kv_->pool();
  std::vector<PageId> pages = std::move(seq.restore_l2);
  const size_t in_l2 = pages.size();
  for (size_t i = 0; i < seq.restore_chain.size(); ++i) {
    if (i < restored) {
      pages.push_back(seq.restore_chain[i].page);
    } else if (i >= kept.size() || !kept[i]) {
      pool.free(seq.restore_chain[i].page);  // the rest of the chain is recomputed
    }
  }
  seq.restore_chain.clear();
  seq.restore_l2.clear();
  if (pages.size() > in_l2) {
    prefix_->insert(seq.prefix_keys.data(), pages.size(), seq.tokens.data(), pages,
                    !seq.request.session_id.empty());
  }
  if (!seq.finished) {
    adopt_prefix(seq, pages);
    seq.restored_shared_tokens = static_cast<int>(restored_pages.shared) * options_.kv_page_tokens;
    seq.restored_disk_tokens =
        static_cast<int>(restored - restored_pages.shared) * options_.kv_page_tokens;
  }
  for (PageId page : pages) pool.free(page);  // the references taken for the restore
}

Engine::Clock::duration Engine::l3_idle() const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.l3_idle_seconds));
}

// Pages stay in L2 at most l3_idle() plus this long after their last use.
Engine::Clock::duration Engine::idle_spill_interval() const {
  return std::min<Clock::duration>(l3_idle(), std::chrono::seconds(1));
}

void Engine::spill_idle_pages(const Clock::time_point now) {
  if (options_.l3_idle_seconds <= 0 || now < next_idle_spill_) return;
  next_idle_spill_ = now + idle_spill_interval();
  const Clock::time_point cutoff = now - l3_idle();
  // Free pages (idle ones just moved to L3, finished requests' last pages) give their memory
  // back to the OS, so a server whose sessions went quiet shrinks. In small batches: each
  // spilled page has a staging copy until its write completes, so releasing only after
  // hundreds of spills would hold both copies of all of them for a moment.
  constexpr size_t kBatch = 16;
  size_t spilled = 0;
  do {
    spilled = prefix_->evict_idle_since(cutoff, kBatch);
    stats_.l3_idle_spills += spilled;
    stats_.kv_bytes_released += kv_->pool().release_free_memory();
  } while (spilled == kBatch);
}

void Engine::collect_l3_restores(const Clock::time_point now) {
  for (auto& seq : seqs_) {
    if (seq->restore && (l3_->restore_done(*seq->restore) || now >= seq->restore_deadline)) {
      end_l3_restore(*seq);
    }
  }
}

int Engine::pages_shared_with_others(const Sequence& seq) const {
  if (!prefix_ || seq.kv_id < 0) return 0;
  const PagePool& pool = kv_->pool();
  const int limit = seq.n_computed / options_.kv_page_tokens;  // shared pages are full ones
  int n = 0;
  for (PageId page : kv_->page_table(seq.kv_id)) {
    const uint32_t sequences = pool.ref_count(page) - (prefix_->holds_page(page) ? 1 : 0);
    if (n == limit || sequences < 2) break;
    ++n;
  }
  return n;
}

void Engine::step() {
  if (l3_) {
    l3_->poll();
    collect_l3_restores(Clock::now());
    spill_idle_pages(Clock::now());
  }
  const Clock::time_point now = Clock::now();
  // Disk reads only for as many queued sequences as there are free batch slots: the others may
  // wait long, and would hold (or lose and read again) their pages meanwhile.
  int l3_reads = options_.max_batch_size;
  for (auto& seq : seqs_) l3_reads -= (seq->running && !seq->finished) || seq->restore ? 1 : 0;
  for (auto& seq : seqs_) {
    if (seq->finished || seq->running) continue;
    reuse_prefix(*seq, l3_reads > 0);
    if (seq->restore) --l3_reads;
  }
  // The scheduler counts a sequence's pages as its own: dropping its KV frees them. Pages that
  // other sequences map too are not freed by that, so each sequence is shown without its
  // leading shared pages, as if its positions started after them (whole pages, so the
  // scheduler's page arithmetic is unchanged); its tasks are shifted back below.
  std::vector<Sequence*> live;
  std::vector<SeqView> views;
  std::vector<int> shift;  // positions hidden from the scheduler, by view
  for (auto& seq : seqs_) {
    if (seq->finished || seq->restore || seq->awaiting_l3) continue;
    const int shared = pages_shared_with_others(*seq);
    const int hidden = shared * options_.kv_page_tokens;
    SeqView v;
    v.running = seq->running;
    v.priority = seq->request.priority;
    v.waited_s = ms_between(seq->running ? seq->last_served : seq->queued_since, now) / 1000.0;
    v.n_tokens = static_cast<int>(seq->tokens.size()) - hidden;
    v.n_computed = seq->n_computed - hidden;
    v.pages_held =
        seq->kv_id < 0 ? 0 : static_cast<int>(kv_->page_table(seq->kv_id).size()) - shared;
    v.arrival = seq->id;
    v.plan_key = seq->plan() ? seq->plan()->key() : 0;
    live.push_back(seq.get());
    views.push_back(v);
    shift.push_back(hidden);
  }
  if (live.empty()) {
    // Only L3 reads are pending: wait for one instead of spinning (short, for new arrivals).
    if (l3_ && !seqs_.empty()) l3_->poll(std::chrono::milliseconds(2));
    return;
  }
  StepDecision decision =
      scheduler_.plan(views, {static_cast<long>(kv_->pages_available()), options_.kv_page_tokens});
  // A sequence whose KV is dropped this step starts again from position 0 (shared pages too).
  for (int i : decision.drop_kv) shift[i] = 0;
  for (TaskDescriptor& t : decision.tasks) t.start += shift[t.seq];

  for (int i : decision.drop_kv) {
    ++stats_.kv_drops;
    drop_kv(*live[i], true);
  }
  for (int i : decision.preempt) {
    ++stats_.preemptions;
    live[i]->running = false;
    live[i]->queued_since = now;
  }
  for (int i : decision.admit) {
    Sequence& seq = *live[i];
    seq.running = true;
    seq.last_served = now;
    if (!seq.started) {
      // What is computed already at the first admission came from the prefix cache.
      seq.cached_tokens = seq.n_computed;
      if (seq.restored_disk_tokens + seq.restored_shared_tokens > seq.cached_tokens) {
        seq.restored_disk_tokens = seq.restored_shared_tokens = 0;  // its KV was dropped since
      }
      stats_.prompt_tokens += seq.request.prompt.size();
      stats_.cached_prompt_tokens += seq.cached_tokens;
      stats_.cached_tokens_disk += seq.restored_disk_tokens;
      stats_.cached_tokens_shared += seq.restored_shared_tokens;
      stats_.cached_tokens_l2 +=
          seq.cached_tokens - seq.restored_disk_tokens - seq.restored_shared_tokens;
      if (!seq.request.session_id.empty()) {
        ++stats_.session_requests;
        stats_.session_cached_tokens += seq.cached_tokens;
      }
    }
    seq.started = true;
  }
  for (Sequence* seq : live) {
    if (seq->running && seq->kv_id < 0) seq->kv_id = take_kv_id();
  }

  if (decision.tasks.empty()) {
    // Nothing fits although sequences run: the top one needs more KV than the whole budget.
    Sequence* stuck = nullptr;
    for (Sequence* seq : live) {
      if (seq->running && (!stuck || seq->request.priority > stuck->request.priority)) stuck = seq;
    }
    if (!stuck) {
      // Only queued sequences and none admitted (not expected: the best-ranked one always fits);
      // do not spin.
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(1));
    } else if (stuck->n_generated > 0) {
      finish(*stuck, FinishReason::Length);
    } else {
      finish(*stuck, FinishReason::Error,
             concat("the KV budget (", kv_->bytes_budget(), " bytes) cannot hold this request"));
    }
    return;
  }

  fault_.at_step(++n_steps_);
  plan_drafts(decision, live);
  const Clock::time_point step_start = Clock::now();
  int n_tokens = 0, n_sequences = 0;
  double positions = 0;  // the sum of the tokens' context positions (attention's share)
  // One forward call per compute plan; the scheduler put each plan's tasks next to each other.
  for (size_t begin = 0; begin < decision.tasks.size();) {
    size_t end = begin;
    std::vector<std::pair<Sequence*, TaskDescriptor>> group;
    while (end < decision.tasks.size() &&
           decision.tasks[end].plan_key == decision.tasks[begin].plan_key) {
      const TaskDescriptor& t = decision.tasks[end++];
      group.push_back({live[t.seq], t});
      n_tokens += t.length;
      positions += double{1.0} * t.length * t.start + double{1.0} * t.length * (t.length - 1) / 2;
      ++n_sequences;
    }
    // Equal keys almost always mean equal plans; split the group if a collision says otherwise.
    while (!group.empty()) {
      const ComputePlan* plan = group.front().first->plan();
      std::vector<std::pair<Sequence*, TaskDescriptor>> same, rest;
      for (auto& entry : group) {
        const ComputePlan* p = entry.first->plan();
        (p == plan || (p && plan && *p == *plan) ? same : rest).push_back(entry);
      }
      run_group(same, plan);
      group.swap(rest);
    }
    begin = end;
  }
  const double step_ms = ms_between(step_start, Clock::now());
  stats_.step_seconds.observe(step_ms / 1000.0);
  if (calibrator_) recalibrate(n_tokens, positions, step_ms);
  stats_.batch_sequences.observe(n_sequences);
  stats_.batch_tokens.observe(n_tokens);
}

void Engine::recalibrate(int n_tokens, double positions, double step_ms) {
  calibrator_->observe(n_tokens, positions, step_ms);
  const std::optional<StepCalibration> c = calibrator_->calibration();
  if (!c) return;
  scheduler_.set_step_cost(c->step_token_budget, c->position_cost);
  stats_.step_token_budget = c->step_token_budget;
  stats_.step_position_cost = c->position_cost;
}

void Engine::run_group(const std::vector<std::pair<Sequence*, TaskDescriptor>>& group,
                       const ComputePlan* plan) {
  std::vector<BatchToken> batch;
  std::vector<std::pair<Sequence*, int>> in_batch;        // sequence, tokens it has in the batch
  std::vector<Sequence*> wanting_logits;                  // in batch order
  std::vector<std::pair<Sequence*, int>> wanting_hidden;  // sequence, position; in batch order
  for (const auto& [seq, task] : group) {
    if (seq->finished) continue;
    try {
      fault_.at_request(seq->id, seq->n_generated);
      kv_->reserve(seq->kv_id, task.start + task.length);
    } catch (const Error& e) {
      finish(*seq, FinishReason::Error, e.what());
      continue;
    } catch (const std::exception& e) {
      fail_after_exception(*seq, e.what());  // e.g. out of memory growing its page table
      continue;
    }
    for (int j = 0; j < task.length; ++j) {
      const int pos = task.start + j;
      const int n_tokens = static_cast<int>(seq->tokens.size());
      BatchToken token{seq->tokens[pos], pos, seq->kv_id, pos + 1 == n_tokens && !seq->pooler};
      token.want_hidden = seq->pooler && seq->pooler->wants(pos, n_tokens);
      batch.push_back(token);
      if (token.want_logits) wanting_logits.push_back(seq);
      if (token.want_hidden) wanting_hidden.push_back({seq, pos});
    }
    if (!plan) add_draft(*seq, task, batch, wanting_logits);
    in_batch.push_back({seq, task.length});
  }
  if (batch.empty()) return;

  const int n_vocab = model_.config().n_vocab;
  logits_.resize(wanting_logits.size() * static_cast<size_t>(n_vocab));
  if (options_.debug_step_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.debug_step_delay_ms));
  }
  try {
    if (!wanting_hidden.empty()) {
      // Embedding requests run without a plan, so they are only in the plan-less group.
      hidden_.resize(wanting_hidden.size() * static_cast<size_t>(model_.config().dim));
      model_.forward_hidden(batch, forward_cache(), logits_.data(), hidden_.data(), *pool_);
    } else if (plan) {
      model_.forward(batch, forward_cache(), logits_.data(), *pool_, plan);
    } else {
      model_.forward(batch, forward_cache(), logits_.data(), *pool_);
    }
  } catch (const std::exception& e) {
    for (auto& [seq, n] : in_batch) finish(*seq, FinishReason::Error, e.what());
    return;
  }
  ++stats_.forward_calls;
  const Clock::time_point served = Clock::now();
  for (auto& [seq, n] : in_batch) {
    seq->last_served = served;
    count_computed(*seq, n, !plan);
  }
  const size_t dim = model_.config().dim;
  for (size_t row = 0; row < wanting_hidden.size(); ++row) {
    auto [seq, pos] = wanting_hidden[row];
    seq->pooler->add(pos, static_cast<int>(seq->tokens.size()), hidden_.data() + row * dim);
  }
  for (auto& [seq, n] : in_batch) {
    if (seq->pooler && seq->n_computed == static_cast<int>(seq->tokens.size())) {
      finish(*seq, FinishReason::Stop);
    }
  }
  for (size_t row = 0; row < wanting_logits.size(); ++row) {
    Sequence& seq = *wanting_logits[row];
    const size_t first_row = row;
    row += seq.draft.size();  // the draft's rows follow the sequence's first one
    try {
      sample_rows(seq, logits_.data() + first_row * static_cast<size_t>(n_vocab));
    } catch (const std::exception& e) {
      // E.g. the sampler refusing NaN logits: this request fails, the engine goes on.
      finish(seq, FinishReason::Error, e.what());
      continue;
    }
    if (seq.request.adaptive_pruning && !seq.finished && pruner_.due(seq.n_generated)) {
      const ComputePlan base =
          seq.request.plan ? *seq.request.plan
                           : ComputePlan::full(model_.config().n_layers, model_.config().n_heads);
      seq.current_plan = pruner_.update(*kv_, seq.kv_id, seq.n_computed, base, seq.adaptive);
      ++stats_.adaptive_updates;
    }
  }
}

void Engine::plan_drafts(const StepDecision& decision, const std::vector<Sequence*>& live) {
  // Drafts take only free pages that none of the step's tasks needs (never cached ones), so
  // drafting never fails a task's reserve nor evicts the prefix cache.
  long needed = 0;
  int n_decoding = 0;
  for (const TaskDescriptor& t : decision.tasks) {
    const Sequence& seq = *live[t.seq];
    n_decoding += t.length == 1 && t.start + 1 == static_cast<int>(seq.tokens.size()) ? 1 : 0;
    needed += std::max(0L, kv_->pages_missing(seq.kv_id, t.start + t.length));
  }
  drafting_ = n_decoding <= options_.speculation.max_batch;
  draft_pages_ = std::max(0L, static_cast<long>(kv_->pool().pages_free()) - needed);
}

void Engine::add_draft(Sequence& seq, const TaskDescriptor& task, std::vector<BatchToken>& batch,
                       std::vector<Sequence*>& wanting_logits) {
  seq.draft.clear();
  const int n_tokens = static_cast<int>(seq.tokens.size());
  if (!drafting_ || seq.request.speculative == SpeculativeMode::kOff ||
      seq.request.adaptive_pruning || seq.pooler || task.length != 1 ||
      task.start + 1 != n_tokens || !seq.draft_length.take_turn()) {
    return;
  }
  // Room for the tokens after this step's first one: max_tokens, and the context (the positions
  // computed end two before it: a sequence that fills it ends without computing its last token).
  const int page_tokens = options_.kv_page_tokens;
  const long in_pages =
      (static_cast<long>(kv_->page_table(seq.kv_id).size()) + draft_pages_) * page_tokens;
  const long k =
      std::min<long>({seq.draft_length.next(), seq.request.max_tokens - seq.n_generated - 1,
                      context_size_ - 1 - n_tokens, in_pages - n_tokens});
  if (k <= 0) return;
  std::vector<TokenId> draft = drafter_->draft(seq.tokens, static_cast<int>(k));
  if (draft.size() > static_cast<size_t>(k)) draft.resize(static_cast<size_t>(k));
  if (draft.empty()) return;
  const int n_positions = n_tokens + static_cast<int>(draft.size());
  const long pages = kv_->pages_missing(seq.kv_id, n_positions);
  try {
    kv_->reserve(seq.kv_id, n_positions);
  } catch (const Error&) {
    return;  // not expected (the pages are free); the step decodes one token instead
  }
  draft_pages_ -= pages;
  for (size_t i = 0; i < draft.size(); ++i) {
    batch.push_back({draft[i], n_tokens + static_cast<int>(i), seq.kv_id, true});
    wanting_logits.push_back(&seq);
  }
  seq.drafted_tokens += static_cast<int>(draft.size());
  stats_.spec_drafted_tokens += draft.size();
  seq.draft = std::move(draft);
}

void Engine::sample_rows(Sequence& seq, float* logits) {
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  on_logits(seq, logits);
  if (seq.draft.empty()) return;
  size_t accepted = 0;
  while (accepted < seq.draft.size() && !seq.finished && seq.tokens.back() == seq.draft[accepted]) {
    // The draft token is the sequence's next token: its KV row is kept and its logits row gives
    // the token after it.
    ++accepted;
    ++seq.accepted_tokens;  // before on_logits, whose token may finish the request
    ++stats_.spec_accepted_tokens;
    count_computed(seq, 1, true);
    on_logits(seq, logits + accepted * n_vocab);
  }
  seq.draft_length.observe(static_cast<int>(seq.draft.size()), static_cast<int>(accepted));
  // The rejected rows' positions lie past n_computed, so the next steps overwrite them before
  // anything reads them; pages that hold only such positions go back to the pool now.
  kv_->truncate(seq.kv_id, seq.n_computed);
}

void Engine::count_computed(Sequence& seq, int n, bool full_model) {
  if (full_model && seq.full_model_computed == seq.n_computed) seq.full_model_computed += n;
  const int recomputed = std::min(seq.n_computed + n, seq.max_computed) - seq.n_computed;
  if (recomputed > 0) stats_.recomputed_tokens += recomputed;
  seq.n_computed += n;
  seq.max_computed = std::max(seq.max_computed, seq.n_computed);
  if (seq.request.progress) seq.request.progress->fetch_add(n, std::memory_order_relaxed);
}

void Engine::on_logits(Sequence& seq, float* logits) {
  const Tokenizer& tokenizer = model_.tokenizer();
  const int n_vocab = model_.config().n_vocab;
  GenerationEvent event;
  const auto sample = [&] {
    // Tokens that may follow this one before max_tokens or the context ends the output.
    const int64_t tokens_left =
        std::min<int64_t>(seq.request.max_tokens - seq.n_generated,
                          context_size_ - static_cast<int64_t>(seq.tokens.size())) -
        1;
    return seq.grammar ? sample_constrained(seq.sampler, *seq.grammar, logits, n_vocab, seq.tokens,
                                            tokens_left)
                       : seq.sampler.sample(logits, seq.tokens);
  };
  if (seq.request.top_logprobs >= 0) {
    // The sampler rewrites logits in place; logprobs are of the raw distribution.
    std::vector<float> raw(logits, logits + n_vocab);
    TokenId token = sample();
    event.logprobs = compute_logprobs(raw.data(), n_vocab, token, seq.request.top_logprobs);
    event.token = token;
  } else {
    event.token = sample();
  }
  const Clock::time_point now = Clock::now();
  if (!seq.has_first_token) {
    seq.has_first_token = true;
    seq.ttft_ms = ms_between(seq.submitted, now);
    stats_.ttft_seconds.observe(seq.ttft_ms / 1000.0);
  } else {
    stats_.inter_token_seconds.observe(ms_between(seq.last_token, now) / 1000.0);
  }
  seq.last_token = now;
  ++seq.n_generated;
  ++stats_.completion_tokens;
  seq.tokens.push_back(event.token);

  const auto& stop_tokens = seq.request.stop_tokens;
  if ((!seq.request.ignore_eos && tokenizer.is_end_of_generation(event.token)) ||
      std::find(stop_tokens.begin(), stop_tokens.end(), event.token) != stop_tokens.end()) {
    finish(seq, FinishReason::Stop);
    return;
  }
  StopMatcher::Result matched =
      seq.stop_matcher.push(seq.utf8.push(tokenizer.token_to_piece(event.token, false)));
  event.text = std::move(matched.emit);
  seq.on_event(event);
  if (matched.stopped) {
    // The text before the stop string went out with this token; nothing is held back any more.
    seq.stop_string_matched = true;
    seq.matched_stop = std::move(matched.stop);
    finish(seq, FinishReason::Stop);
    return;
  }
  if (seq.grammar && seq.grammar->is_complete()) {
    finish(seq, FinishReason::Stop);  // nothing may follow: the output is whole
    return;
  }
  if (seq.n_generated >= seq.request.max_tokens ||
      static_cast<int>(seq.tokens.size()) >= context_size_) {
    finish(seq, FinishReason::Length);
  }
}

void Engine::finish(Sequence& seq, FinishReason reason, std::string error) {
  if (seq.finished) return;
  seq.finished = true;
  GenerationEvent event;
  event.kind = GenerationEvent::Kind::Finished;
  if (!seq.stop_string_matched && reason != FinishReason::Error) {
    // Release what the UTF-8 decoder and the stop matcher still hold.
    StopMatcher::Result tail = seq.stop_matcher.push(seq.utf8.flush());
    event.text = std::move(tail.emit);
    if (!tail.stopped) event.text += seq.stop_matcher.flush();
  }
  event.finish_reason = reason;
  event.matched_stop = seq.matched_stop;
  event.error = std::move(error);
  event.queue_timeout = seq.queue_timeout;
  event.prompt_tokens = static_cast<int>(seq.request.prompt.size());
  event.cached_tokens = seq.cached_tokens;
  event.cached_tokens_disk = seq.restored_disk_tokens;
  event.cached_tokens_shared = seq.restored_shared_tokens;
  event.completion_tokens = seq.n_generated;
  event.ttft_ms = seq.ttft_ms;
  event.total_ms = ms_between(seq.submitted, Clock::now());
  event.adaptive_decisions = seq.adaptive.decisions;
  if (seq.plan() != nullptr) event.final_plan = seq.current_plan;
  event.drafted_tokens = seq.drafted_tokens;
  event.accepted_tokens = seq.accepted_tokens;
  if (seq.pooler && reason == FinishReason::Stop) event.embedding = seq.pooler->result();
  ++stats_.requests_finished[static_cast<int>(reason)];
  stats_.request_seconds.observe(event.total_ms / 1000.0);
  // The request is over either way: a consumer that cannot take its last event (out of
  // memory) must not take the engine, and the other requests, down with it.
  try {
    seq.on_event(event);
  } catch (const std::exception& e) {
    std::cerr << "error: request " << seq.id << " lost its last event: " << e.what() << "\n";
  }
}

void Engine::release_finished() {
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if ((*it)->finished) {
      try {
        if ((*it)->restore) end_l3_restore(**it);
        drop_kv(**it);
      } catch (const std::exception& e) {
        std::cerr << "error: request " << (*it)->id << ": caching its KV failed (" << e.what()
                  << "); released uncached\n";
        discard_kv(**it);
      }
      it = seqs_.erase(it);
    } else {
      ++it;
    }
  }
  try {
    publish_stats();
  } catch (const std::exception&) {
    // Out of memory for the scheduler's views: the next step publishes them.
  }
}

void Engine::publish_shared_stats(const SharedTierStats& s) {
  stats_.shared_tier = true;
  stats_.shared_up = s.up;
  stats_.shared_hits = s.hits;
  stats_.shared_misses = s.misses;
  stats_.shared_bytes_in = s.bytes_in;
  stats_.shared_bytes_out = s.bytes_out;
  stats_.shared_errors = s.errors;
  stats_.shared_corrupt = s.corrupt;
  stats_.shared_writes = s.writes;
  stats_.shared_writes_skipped = s.writes_skipped;
  stats_.shared_restores = s.restores;
  stats_.shared_read_p50_s = s.read_p50_s;
  stats_.shared_read_p99_s = s.read_p99_s;
}

void Engine::publish_stats() {
  int n_running = 0;
  std::vector<SeqView> views;
  for (const auto& seq : seqs_) {
    n_running += seq->running ? 1 : 0;
    SeqView v;
    v.n_tokens = static_cast<int>(seq->tokens.size());
    v.n_computed = seq->n_computed;
    views.push_back(v);
  }
  stats_.kv_bytes_used = kv_->bytes_used();
  if (l1_) stats_.l1_hit_share = l1_->hit_share();
  stats_.kv_pages_used = kv_->pages_used();
  if (prefix_) {
    stats_.prefix_cache_pages = prefix_->pages();
    stats_.prefix_cache_idle_pages = prefix_->reclaimable();
    stats_.prefix_cache_evictions = prefix_->stats().evicted_pages;
  }
  if (l3_) {
    const L3TierStats l3 = l3_->disk_stats();
    stats_.l3_spills = l3.spills;
    stats_.l3_spill_failures = l3.spill_failures;
    stats_.l3_restores = l3.restores;
    stats_.l3_recomputations = l3.restore_failures;
    stats_.l3_pages_stored = l3_->disk_pages_stored();
    stats_.l3_dropped = l3.dropped;
    stats_.l3_read_latency_p99_s = l3_->disk_read_latency_p99_s();
    stats_.l3_read_queue_wait_p99_s = l3.read_queue_wait_p99_s;
    stats_.l3_checksum_failures = l3.checksum_failures;
    stats_.l3_io_errors = l3.io_errors;
    stats_.l3_no_space = l3.no_space;
    stats_.l3_journal_errors = l3.journal_errors;
    stats_.l3_files_lost = l3.files_lost;
    stats_.l3_writes_in_flight = l3.writes_in_flight;
    if (l3_->has_shared()) publish_shared_stats(l3_->shared_stats());
  }
  stats_.micro_task_queue_len = scheduler_.pending_micro_tasks(views);
  std::lock_guard lock(mutex_);
  n_running_shared_ = n_running;
  n_queued_shared_ = static_cast<int>(seqs_.size() + submitted_.size()) - n_running;
  stats_.requests_running = n_running_shared_;
  stats_.requests_waiting = n_queued_shared_;
}

}  // namespace k25
