#include "kv/prefix_cache.h"

#include <algorithm>

#include "core/bits.h"

namespace k25 {

PrefixCache::PrefixCache(PagePool& pool, uint64_t seed)
    : pool_(pool), seed_(splitmix64(seed)), page_tokens_(pool.geometry().page_tokens) {}

PrefixCache::~PrefixCache() {
  for (auto& [key, e] : entries_) pool_.free(e.page);
}

uint64_t PrefixCache::child_key(uint64_t parent, const int32_t* tokens) const {
  uint64_t h = splitmix64(parent ^ 0x6b32355f6b76ull);  // distinct from a token step
  for (int i = 0; i < page_tokens_; ++i) h = splitmix64(h ^ static_cast<uint32_t>(tokens[i]));
  return h;
}

void PrefixCache::chain_keys(const int32_t* tokens, size_t n_pages,
                             std::vector<uint64_t>* keys) const {
  uint64_t parent = keys->empty() ? seed_ : keys->back();
  for (size_t i = keys->size(); i < n_pages; ++i) {
    parent = child_key(parent, tokens + i * page_tokens_);
    keys->push_back(parent);
  }
}

bool PrefixCache::holds(const Entry& e, uint64_t parent, const int32_t* tokens) const {
  return e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), tokens);
}

void PrefixCache::touch_chain(const uint64_t* keys, size_t n) {
  const auto now = std::chrono::steady_clock::now();
  // Deepest first, so that page 0 ends up the most recently used of the chain.
  for (size_t i = n; i-- > 0;) {
    auto it = entries_.find(keys[i]);
    if (it == entries_.end()) continue;
    lru_.splice(lru_.end(), lru_, it->second.lru);
    it->second.touched = now;
  }
}

std::vector<PageId> PrefixCache::lookup(const uint64_t* keys, size_t n_keys,
                                        const int32_t* tokens) {
  ++stats_.lookups;
  std::vector<PageId> pages;
  uint64_t parent = seed_;
  for (size_t i = 0; i < n_keys; ++i) {
    auto it = entries_.find(keys[i]);
    if (it == entries_.end() || !holds(it->second, parent, tokens + i * page_tokens_)) break;
    pages.push_back(it->second.page);
    parent = keys[i];
  }
  touch_chain(keys, pages.size());
  stats_.hit_pages += pages.size();
  return pages;
}

void PrefixCache::insert(const uint64_t* keys, size_t n_keys, const int32_t* tokens,
                         const std::vector<PageId>& pages, bool session) {
  const size_t n = std::min(n_keys, pages.size());
  uint64_t parent = seed_;
  size_t kept = 0;
  for (; kept < n; ++kept) {
    const int32_t* page_tokens = tokens + kept * page_tokens_;
    auto it = entries_.find(keys[kept]);
    if (it != entries_.end()) {
      // Cached already (this very page, adopted earlier, or an equal one computed apart).
      if (!holds(it->second, parent, page_tokens)) break;  // a hash collision: stop the chain
      it->second.session = it->second.session || session;
    } else {
      pool_.retain(pages[kept]);
      if (pages[kept] >= held_.size()) held_.resize(pages[kept] + 1, 0);
      held_[pages[kept]] = 1;
      Entry e;
      e.page = pages[kept];
      e.parent = parent;
      e.tokens.assign(page_tokens, page_tokens + page_tokens_);
      e.session = session;
      e.lru = lru_.insert(lru_.end(), keys[kept]);
      entries_.emplace(keys[kept], std::move(e));
      ++stats_.inserted_pages;
    }
    parent = keys[kept];
  }
  touch_chain(keys, kept);
}

void PrefixCache::for_each_page(const std::function<void(const CachedPage&)>& visit) const {
  for (const auto& [key, e] : entries_) visit({key, e.parent, e.tokens.data(), e.page});
}

size_t PrefixCache::reclaimable() const {
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += pool_.ref_count(e.page) == 1 ? 1 : 0;
  return n;
}

bool PrefixCache::reclaim_one() {
  // The least recently used idle page without a session; failing that, with one.
  auto victim = lru_.end();
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    const Entry& e = entries_.at(*it);
    if (pool_.ref_count(e.page) != 1) continue;
    if (!e.session) {
      victim = it;
      break;
    }
    if (victim == lru_.end()) victim = it;
  }
  if (victim == lru_.end()) return false;
  evict(victim, EvictCause::kReclaim);
  return true;
}

void PrefixCache::evict(std::list<uint64_t>::iterator it, EvictCause cause) {
  const uint64_t key = *it;
  const Entry& e = entries_.at(key);
  const PageId page = e.page;
  if (evict_hook_) evict_hook_({key, e.parent, e.tokens.data(), page}, cause);
  lru_.erase(it);
  entries_.erase(key);
  held_[page] = 0;
  pool_.free(page);
  ++stats_.evicted_pages;
}

size_t PrefixCache::evict_idle_since(std::chrono::steady_clock::time_point cutoff,
                                     size_t max_pages) {
  size_t n = 0;
  // The LRU list is in touch order, so the pages untouched since `cutoff` come first.
  for (auto it = lru_.begin();
       n < max_pages && it != lru_.end() && entries_.at(*it).touched < cutoff;) {
    auto next = std::next(it);
    if (pool_.ref_count(entries_.at(*it).page) == 1) {
      evict(it, EvictCause::kIdle);
      ++n;
    }
    it = next;
  }
  return n;
}

}  // namespace k25
