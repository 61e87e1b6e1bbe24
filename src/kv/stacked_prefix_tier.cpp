#include "kv/stacked_prefix_tier.h"

#include <algorithm>

namespace k25 {

StackedPrefixTier::StackedPrefixTier(std::unique_ptr<PrefixTier> local,
                                     std::unique_ptr<PrefixTier> shared)
    : local_(std::move(local)), shared_(std::move(shared)) {}

StackedPrefixTier::~StackedPrefixTier() {
  local_.reset();
  shared_.reset();
}

void StackedPrefixTier::spill(const CachedPage& page, SpillSource source) {
  local_->spill(page, source);
  shared_->spill(page, source);
}

bool StackedPrefixTier::contains(uint64_t key) const {
  return local_->contains(key) || shared_->contains(key);
}

TierProbeId StackedPrefixTier::probe(const uint64_t* keys, size_t n_keys) {
  size_t on_disk = 0;
  while (on_disk < n_keys && local_->contains(keys[on_disk])) ++on_disk;
  if (on_disk == n_keys) return 0;
  return shared_->probe(keys + on_disk, n_keys - on_disk);
}

L3RestoreId StackedPrefixTier::begin_restore(std::vector<CachedPage> chain) {
  Restore r;
  while (r.local_pages < chain.size() && local_->contains(chain[r.local_pages].key)) {
    ++r.local_pages;
  }
  std::vector<CachedPage> rest(chain.begin() + static_cast<std::ptrdiff_t>(r.local_pages),
                               chain.end());
  while (r.shared_pages < rest.size() && shared_->contains(rest[r.shared_pages].key)) {
    ++r.shared_pages;
  }
  rest.resize(r.shared_pages);
  chain.resize(r.local_pages);
  if (!chain.empty()) r.local = local_->begin_restore(std::move(chain));
  if (!rest.empty()) r.shared = shared_->begin_restore(std::move(rest));
  const L3RestoreId id = next_restore_++;
  restores_[id] = r;
  return id;
}

bool StackedPrefixTier::restore_done(L3RestoreId id) const {
  auto it = restores_.find(id);
  if (it == restores_.end()) return true;
  return (!it->second.local || local_->restore_done(it->second.local)) &&
         (!it->second.shared || shared_->restore_done(it->second.shared));
}

RestoredPages StackedPrefixTier::end_restore(L3RestoreId id, std::vector<bool>* kept) {
  const Restore r = restores_.at(id);
  restores_.erase(id);
  std::vector<bool> local_kept, shared_kept;
  RestoredPages local, shared;
  if (r.local) local = local_->end_restore(r.local, &local_kept);
  if (r.shared) shared = shared_->end_restore(r.shared, &shared_kept);
  local_kept.resize(r.local_pages, false);
  shared_kept.resize(r.shared_pages, false);
  *kept = local_kept;
  kept->insert(kept->end(), shared_kept.begin(), shared_kept.end());
  // A chain is used from its start: the Redis part counts only after a whole disk part.
  RestoredPages out = local;
  if (local.total == r.local_pages) {
    out.total += shared.total;
    out.shared += shared.shared;
  }
  return out;
}

void StackedPrefixTier::poll(std::chrono::milliseconds timeout) {
  local_->poll(timeout);
  shared_->poll();
}

void StackedPrefixTier::limit_in_flight(size_t max_in_flight) {
  local_->limit_in_flight(max_in_flight);
  shared_->limit_in_flight(max_in_flight);
}

std::chrono::milliseconds StackedPrefixTier::read_timeout() const {
  return std::max(local_->read_timeout(), shared_->read_timeout());
}

}  // namespace k25
