// The L2 prefix cache (R-KV4, docs/kv-cache.md "Prefix reuse and sessions"): full KV pages of
// finished (or dropped) sequences, kept in the pool and found again by the tokens they hold, so a
// prompt that starts like an earlier one (the next turn of a conversation, a shared system
// prompt) maps those pages into its page table instead of computing them.
//
// A page is keyed by a chained hash: key(page i) = H(key(page i - 1), the page_tokens token ids of
// page i), starting from a seed that names the model and KV geometry. Equal keys mean equal token
// prefixes, so a page is only ever found by a prompt whose whole prefix up to and including that
// page is the same. Each entry also keeps its parent key and its tokens, and lookups compare
// them, so a hash collision cannot map wrong KV.
//
// The cache holds one pool reference on each of its pages. A page also referenced by a sequence
// is pinned; a page held only by the cache is idle and is given back to the pool (evicted) when
// the pool needs room: pages of requests without a session first, then least recently used.
// Lookups and inserts touch a chain deepest page first, so a parent is always more recent than
// its children and eviction takes leaves before the pages they hang off.
//
// Thread-safety: none; the engine thread calls it, like PagePool.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_reclaimer.h"

namespace k25 {

// One cached page as the evict hook and for_each_page() show it.
struct CachedPage {
  uint64_t key = 0;
  uint64_t parent = 0;              // the previous page's key, or root_key() for page 0
  const int32_t* tokens = nullptr;  // page_tokens token ids
  PageId page = 0;
};

struct PrefixCacheStats {
  uint64_t lookups = 0;         // lookup() calls
  uint64_t hit_pages = 0;       // pages returned by lookup()
  uint64_t inserted_pages = 0;  // pages that entered the cache
  uint64_t evicted_pages = 0;   // idle pages given back to the pool
};

class PrefixCache final : public PageReclaimer {
 public:
  // `pool` must outlive the cache. `seed` starts every hash chain (model and geometry identity).
  PrefixCache(PagePool& pool, uint64_t seed);
  ~PrefixCache() override;  // drops the cache's references
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Extends `keys` (the keys of the first keys->size() pages of `tokens`, or empty) to the keys
  // of the first `n_pages` full pages of `tokens`, which holds at least that many pages.
  void chain_keys(const int32_t* tokens, size_t n_pages, std::vector<uint64_t>* keys) const;

  // The cached pages holding the longest prefix of the chain (`n_keys` keys from chain_keys over
  // `tokens`), page 0 first; empty when page 0 is not cached. The caller adopts them right away
  // (before anything can be evicted). Touches them.
  std::vector<PageId> lookup(const uint64_t* keys, size_t n_keys, const int32_t* tokens);

  // Offers the first n_keys pages of a sequence (`pages`, computed by the full model from
  // `tokens`). Pages whose key is cached already are skipped (the sequence's copy goes back to
  // the pool when it clears); new ones gain a cache reference. `session`: the pages are kept in
  // preference to those of requests without a session.
  void insert(const uint64_t* keys, size_t n_keys, const int32_t* tokens,
              const std::vector<PageId>& pages, bool session);

  // Why a page leaves the cache: an allocation needs its memory now (reclaim_one), or it went
  // unused since a cutoff (evict_idle_since).
  enum class EvictCause : uint8_t { kReclaim, kIdle };
  // Called with each page about to be evicted, before the cache's reference on it goes back to
  // the pool: the place to write it to a lower tier. Null: none.
  using EvictHook = std::function<void(const CachedPage&, EvictCause)>;
  void set_evict_hook(EvictHook hook) { evict_hook_ = std::move(hook); }
  // Every cached page, in no particular order (e.g. to save them all at shutdown).
  void for_each_page(const std::function<void(const CachedPage&)>& visit) const;
  // The parent key of page 0 (derived from the seed).
  uint64_t root_key() const { return seed_; }

  // PageReclaimer: idle pages (held only by the cache), and evicting one of them.
  size_t reclaimable() const override;
  bool reclaim_one() override;
  // Evicts (through the evict hook) the idle pages that no lookup or insert has touched since
  // `cutoff`, oldest first, at most `max_pages`: KV of sessions gone quiet, moved to L3 to free
  // RAM (R-KV2). Returns how many.
  size_t evict_idle_since(std::chrono::steady_clock::time_point cutoff,
                          size_t max_pages = SIZE_MAX);

  // Whether the cache holds a reference on `page`.
  bool holds_page(PageId page) const { return page < held_.size() && held_[page]; }
  size_t pages() const { return entries_.size(); }
  const PrefixCacheStats& stats() const { return stats_; }
  int page_tokens() const { return page_tokens_; }

 private:
  struct Entry {
    PageId page = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    bool session = false;
    std::list<uint64_t>::iterator lru;              // position in lru_
    std::chrono::steady_clock::time_point touched;  // last lookup or insert
  };
  void evict(std::list<uint64_t>::iterator it, EvictCause cause);
  uint64_t child_key(uint64_t parent, const int32_t* tokens) const;
  // Whether `e` is the entry of the page after `parent` holding `tokens`.
  bool holds(const Entry& e, uint64_t parent, const int32_t* tokens) const;
  void touch_chain(const uint64_t* keys, size_t n);

  PagePool& pool_;
  uint64_t seed_;
  int page_tokens_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;    // keys, least recently used first
  std::vector<uint8_t> held_;  // by page id: 1 = an entry holds it
  EvictHook evict_hook_;
  PrefixCacheStats stats_;
};

}  // namespace k25
