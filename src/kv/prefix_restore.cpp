#include "kv/prefix_restore.h"

namespace k25 {

std::optional<PrefixRestore> PrefixRestore::begin(PrefixTier& tier, PrefixCache& prefix,
                                                  PagePool& pool, const Chain& chain,
                                                  std::vector<PageId> l2_pages,
                                                  bool reclaim_cached) {
  for (PageId page : l2_pages) pool.retain(page);  // not evictable while the rest is read
  std::vector<CachedPage> reading;                 // fresh L2 pages for the pages the tier holds
  for (size_t i = l2_pages.size(); i < chain.n_pages && tier.contains(chain.keys[i]); ++i) {
    std::optional<PageId> page = pool.allocate();
    while (!page && reclaim_cached && prefix.reclaim_one()) page = pool.allocate();
    if (!page) break;
    reading.push_back({chain.keys[i], i ? chain.keys[i - 1] : prefix.root_key(),
                       chain.tokens + i * chain.page_tokens, *page});
  }
  if (reading.empty()) {
    for (PageId page : l2_pages) pool.free(page);
    return std::nullopt;
  }
  PrefixRestore r;
  r.l2_pages_ = std::move(l2_pages);
  r.reading_ = reading;
  r.id_ = tier.begin_restore(std::move(reading));
  r.deadline_ = Clock::now() + tier.read_timeout();
  return r;
}

bool PrefixRestore::ready(const PrefixTier& tier, Clock::time_point now) const {
  return tier.restore_done(id_) || now >= deadline_;
}

PrefixRestore::Outcome PrefixRestore::end(
    PrefixTier& tier, PrefixCache& prefix, PagePool& pool, const Chain& chain, bool session,
    const std::function<void(const std::vector<PageId>&)>& adopt) {
  std::vector<bool> kept;
  const RestoredPages restored = tier.end_restore(id_, &kept);
  std::vector<PageId> pages = std::move(l2_pages_);
  const size_t in_l2 = pages.size();
  for (size_t i = 0; i < reading_.size(); ++i) {
    if (i < restored.total) {
      pages.push_back(reading_[i].page);
    } else if (i >= kept.size() || !kept[i]) {
      pool.free(reading_[i].page);  // the rest of the chain is recomputed
    }
  }
  reading_.clear();
  if (pages.size() > in_l2) prefix.insert(chain.keys, pages.size(), chain.tokens, pages, session);
  if (adopt) adopt(pages);
  for (PageId page : pages) pool.free(page);  // the references taken for the restore
  return {restored.total - restored.shared, restored.shared};
}

bool SharedTierProbe::pending(PrefixTier& tier, const uint64_t* keys, size_t first_missing,
                              size_t n_pages) {
  if (id_) {
    if (!tier.probe_done(*id_) && std::chrono::steady_clock::now() < deadline_) return true;
    id_.reset();
    return false;
  }
  if (asked_ || tier.contains(keys[first_missing])) return false;
  asked_ = true;
  const TierProbeId id = tier.probe(keys + first_missing, n_pages - first_missing);
  if (id == 0 || tier.probe_done(id)) return false;
  id_ = id;
  started_ = std::chrono::steady_clock::now();
  deadline_ = started_ + tier.read_timeout();
  return true;
}

}  // namespace k25
