// Engine: KV residency and the tiers behind it. A queued prompt maps the pages the prefix cache
// holds, or waits while L3 / the shared tier reads them back (kv/prefix_restore.h); finished
// sequences publish their pages; idle pages are spilled to L3.
#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "engine/engine_sequence.h"
#include "kv/shared_kv_namespace.h"
#include "kv/stacked_prefix_tier.h"

namespace k25 {

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
  if (!l3_) return;
  // A page reclaimed for an allocation is copied, so that its memory is free at once; an idle
  // one is written from the page itself, which goes back to the pool when the write completes.
  prefix_->set_evict_hook([this](const CachedPage& page, PrefixCache::EvictCause cause) {
    l3_->spill(page,
               cause == PrefixCache::EvictCause::kIdle ? SpillSource::kPage : SpillSource::kCopy);
  });
  if (options_.l3_session_prefetch) session_prefetcher_.emplace();
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
  // Keys in tiles since kKeyLayoutVersion 2: stores of row-layout keys start empty.
  mix(kKeyLayoutVersion);
  mix(L3PrefixTier::kRecordVersion);  // 2: stores of unpadded headers start empty
  o.content_tag = tag;
  try {
    return std::make_unique<L3PrefixTier>(o, kv_->pool());
  } catch (const std::exception& e) {
    std::cerr << "warning: L3 KV tier off: " << e.what() << "\n";
    return nullptr;
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
      // Copied: a preemption is for memory, and a page held for its write could not be reclaimed.
      l3_->spill({seq.prefix_keys[i], parent,
                  seq.tokens.data() + i * static_cast<size_t>(options_.kv_page_tokens), pages[i]},
                 SpillSource::kCopy);
    }
  }
  if (!preempted && l3_ && !seq.plan()) write_through(seq);
  if (!preempted && session_prefetcher_ && !seq.request.session_id.empty()) {
    record_session_turn(seq);
  }
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
  if (l3_ && pages.size() < n_pages &&
      seq.probe.pending(*l3_, seq.prefix_keys.data(), pages.size(), n_pages)) {
    seq.awaiting_l3 = true;  // not scheduled until the shared tier answers (or times out)
    return;
  }
  if (pages.size() < n_pages && page_being_fetched(seq.prefix_keys[pages.size()])) {
    seq.awaiting_l3 = true;  // a session prefetch is reading it: wait for that, not read twice
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

PrefixRestore::Chain Engine::prefix_chain(const Sequence& seq, size_t n_pages) const {
  return {seq.prefix_keys.data(), seq.tokens.data(), n_pages, options_.kv_page_tokens};
}

bool Engine::begin_l3_restore(Sequence& seq, const std::vector<PageId>& l2_pages, size_t n_pages) {
  seq.restore =
      PrefixRestore::begin(*l3_, *prefix_, kv_->pool(), prefix_chain(seq, n_pages), l2_pages);
  if (!seq.restore) return false;
  // A restore from memory (the shared tier's values, read by the probe) is done already: the
  // sequence may join this step.
  if (seq.restore->ready(*l3_, Clock::now())) end_l3_restore(seq);
  return true;
}

void Engine::end_l3_restore(Sequence& seq) {
  // A finished sequence takes no pages; they still join the prefix cache.
  const auto adopt = [&](const std::vector<PageId>& pages) {
    if (!seq.finished) adopt_prefix(seq, pages);
  };
  const PrefixRestore::Outcome restored =
      seq.restore->end(*l3_, *prefix_, kv_->pool(), prefix_chain(seq, seq.prefix_keys.size()),
                       !seq.request.session_id.empty(), adopt);
  seq.restore.reset();
  if (!seq.finished) {
    seq.restored_shared_tokens = static_cast<int>(restored.from_shared) * options_.kv_page_tokens;
    seq.restored_disk_tokens = static_cast<int>(restored.from_disk) * options_.kv_page_tokens;
  }
}

Engine::Clock::duration Engine::l3_idle() const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.l3_idle_seconds));
}

// Pages stay in L2 at most l3_idle() plus this long after their last use. A quarter of the idle
// time: checking once per idle time let pages linger up to twice it, and at a few requests a
// second those lingering pages were a third of the server's peak RSS.
Engine::Clock::duration Engine::idle_spill_interval() const {
  return std::min<Clock::duration>(l3_idle() / 4, std::chrono::seconds(1));
}

void Engine::spill_idle_pages(const Clock::time_point now) {
  if (options_.l3_idle_seconds <= 0 || now < next_idle_spill_) return;
  next_idle_spill_ = now + idle_spill_interval();
  const Clock::time_point cutoff = now - l3_idle();
  // Free pages (idle ones just moved to L3, finished requests' last pages) give their memory
  // back to the OS, so a server whose sessions went quiet shrinks. In small batches: a page
  // spilled while the pool is short of free pages has a staging copy until its write completes,
  // so releasing only after hundreds of spills would hold both copies of all of them for a
  // moment. (A page written in place goes back to the pool when its write completes, and is
  // released at the next interval unless it is allocated again by then.)
  // The pages the next interval is likely to allocate stay resident (kv/free_page_reserve.h).
  constexpr size_t kBatch = 16;
  const size_t keep = free_page_reserve_.update(kv_->pool().allocations());
  size_t spilled = 0;
  do {
    spilled = prefix_->evict_idle_since(cutoff, kBatch);
    stats_.l3_idle_spills += spilled;
    stats_.kv_bytes_released += kv_->pool().release_free_memory(keep);
  } while (spilled == kBatch);
}

void Engine::collect_l3_restores(const Clock::time_point now) {
  for (auto& seq : seqs_) {
    if (seq->restore && seq->restore->ready(*l3_, now)) {
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

void Engine::advance_kv_tiers() {
  l3_->poll();
  collect_l3_restores(Clock::now());
  if (session_prefetcher_) prefetch_sessions(Clock::now());
  spill_idle_pages(Clock::now());
}

void Engine::record_session_turn(const Sequence& seq) {
  const size_t n_pages =
      seq.plan() ? 0
                 : std::min(seq.prefix_keys.size(),
                            static_cast<size_t>(seq.full_model_computed / options_.kv_page_tokens));
  SessionPrefetcher::Chain chain;
  chain.keys.assign(seq.prefix_keys.begin(), seq.prefix_keys.begin() + n_pages);
  chain.tokens.assign(seq.tokens.begin(),
                      seq.tokens.begin() + n_pages * static_cast<size_t>(options_.kv_page_tokens));
  session_prefetcher_->record(std::hash<std::string>{}(seq.request.session_id), seq.submitted,
                              std::move(chain));
}

Engine::Clock::duration Engine::prefetch_lead() const {
  // Early enough for a chain's reads; within the idle time, or the pages would be spilled again
  // before the turn comes.
  const Clock::duration lead = std::chrono::milliseconds(500);
  return options_.l3_idle_seconds > 0 ? std::min(lead, l3_idle() / 2) : lead;
}

PrefixRestore::Chain Engine::fetch_chain(const SessionFetch& fetch) const {
  return {fetch.chain.keys.data(), fetch.chain.tokens.data(), fetch.chain.keys.size(),
          options_.kv_page_tokens};
}

bool Engine::page_being_fetched(uint64_t key) const {
  for (const SessionFetch& fetch : session_fetches_) {
    if (std::find(fetch.chain.keys.begin(), fetch.chain.keys.end(), key) !=
        fetch.chain.keys.end()) {
      return true;
    }
  }
  return false;
}

void Engine::prefetch_sessions(const Clock::time_point now) {
  end_session_fetches(now, false);
  PagePool& pool = kv_->pool();
  for (const SessionPrefetcher::Chain* due : session_prefetcher_->due(now, prefetch_lead())) {
    const size_t n_pages = due->keys.size();
    std::vector<PageId> l2_pages = prefix_->lookup(due->keys.data(), n_pages, due->tokens.data());
    const size_t first_missing = l2_pages.size();
    if (first_missing == n_pages || !l3_->contains(due->keys[first_missing]) ||
        page_being_fetched(due->keys[first_missing])) {
      continue;
    }
    // Free pages only, and never the last eighth of the pool: a prefetch must not take memory
    // that running requests need, nor evict what others cached.
    if (pool.pages_free() < n_pages - first_missing + pool.pages_total() / 8) {
      ++stats_.l3_prefetch_skipped;
      continue;
    }
    SessionFetch fetch{*due, std::nullopt};
    fetch.restore =
        PrefixRestore::begin(*l3_, *prefix_, pool, fetch_chain(fetch), std::move(l2_pages), false);
    if (!fetch.restore) continue;
    ++stats_.l3_prefetches;
    session_fetches_.push_back(std::move(fetch));  // the chain's buffers move with it
  }
}

void Engine::end_session_fetches(const Clock::time_point now, bool all) {
  for (auto it = session_fetches_.begin(); it != session_fetches_.end();) {
    if (!all && !it->restore->ready(*l3_, now)) {
      ++it;
      continue;
    }
    const PrefixRestore::Outcome outcome =
        it->restore->end(*l3_, *prefix_, kv_->pool(), fetch_chain(*it), true, nullptr);
    stats_.l3_prefetched_pages += outcome.from_disk + outcome.from_shared;
    prefetched_from_disk_ += outcome.from_disk;
    it = session_fetches_.erase(it);
  }
}

void Engine::map_cached_prefixes() {
  // Disk reads only for as many queued sequences as there are free batch slots: the others may
  // wait long, and would hold (or lose and read again) their pages meanwhile.
  int l3_reads = options_.max_batch_size;
  for (auto& seq : seqs_) l3_reads -= (seq->running && !seq->finished) || seq->restore ? 1 : 0;
  for (auto& seq : seqs_) {
    if (seq->finished || seq->running) continue;
    reuse_prefix(*seq, l3_reads > 0);
    if (seq->restore) --l3_reads;
  }
}

bool Engine::await_new_probes() {
  // A probe is usually answered within a millisecond (GETs of a nearby Redis, misses bringing no
  // bytes). Composing the step without waiting for it would keep the sequence out for a whole
  // step, tens of milliseconds or more; the tier's grace bounds what the others pay for it.
  const Clock::duration grace = l3_->probe_grace();
  Clock::time_point until{};
  const auto unanswered = [&](const std::unique_ptr<Sequence>& seq) {
    return seq->awaiting_l3 && seq->probe.unanswered(*l3_);
  };
  for (auto& seq : seqs_) {
    if (unanswered(seq)) until = std::max(until, seq->probe.started() + grace);
  }
  if (Clock::now() >= until) return false;
  do {
    l3_->poll(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()) +
              std::chrono::milliseconds(1));
  } while (Clock::now() < until && std::any_of(seqs_.begin(), seqs_.end(), unanswered));
  return true;
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
  stats_.shared_writes_in_flight = s.writes_in_flight;
  stats_.shared_restores = s.restores;
  stats_.shared_read_p50_s = s.read_p50_s;
  stats_.shared_read_p99_s = s.read_p99_s;
}

}  // namespace k25
