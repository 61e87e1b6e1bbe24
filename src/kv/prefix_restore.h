// One prompt's prefix on its way back from L3 or the shared tier into L2 (R-KV2): the leading
// pages found in L2 are pinned, fresh L2 pages are taken for the chain's next pages that the tier
// holds, and the reads fill them while the engine keeps computing other sequences. The engine
// holds one per sequence being restored and does not schedule that sequence meanwhile.
//
// Also the shared tier's probe: a tier that only knows by asking a server which pages it holds
// is asked once per prompt, and the sequence waits (bounded) for the answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kv/page_pool.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_tier.h"

namespace k25 {

class PrefixRestore {
 public:
  using Clock = std::chrono::steady_clock;

  // The pages of a prompt's chain: `keys[i]` names page i, holding tokens [i, i + 1) *
  // page_tokens of `tokens`.
  struct Chain {
    const uint64_t* keys;
    const int32_t* tokens;
    size_t n_pages;
    int page_tokens;
  };
  struct Outcome {
    size_t from_disk = 0;    // pages read from the local disk tier
    size_t from_shared = 0;  // pages read from the shared tier
  };

  // Pins `l2_pages` (the chain's leading pages found in L2) and starts reading the pages after
  // them that the tier holds into fresh L2 pages (free ones, and with `reclaim_cached` cached
  // ones evicted for them). nullopt, with nothing pinned, when no page could be read.
  static std::optional<PrefixRestore> begin(PrefixTier& tier, PrefixCache& prefix, PagePool& pool,
                                            const Chain& chain, std::vector<PageId> l2_pages,
                                            bool reclaim_cached = true);

  // The reads completed, or the tier's read timeout passed since begin().
  bool ready(const PrefixTier& tier, Clock::time_point now) const;

  // Ends the restore: the restored pages join the prefix cache (as a session's when `session`),
  // `adopt` (when given) gets the L2 pages and the restored ones, in chain order, while they are
  // still pinned; then the pins are dropped and the pages not restored go back to the pool (the
  // rest of the chain is recomputed).
  Outcome end(PrefixTier& tier, PrefixCache& prefix, PagePool& pool, const Chain& chain,
              bool session, const std::function<void(const std::vector<PageId>&)>& adopt);

 private:
  PrefixRestore() = default;

  L3RestoreId id_ = 0;
  std::vector<PageId> l2_pages_;
  std::vector<CachedPage> reading_;
  Clock::time_point deadline_;
};

// Asks the shared tier, once per prompt, which of the chain's pages from `first_missing` on it
// holds, and says whether the sequence should still wait for that answer.
class SharedTierProbe {
 public:
  // True while a probe is in flight and its time is not up; starts one on the first call when
  // the tier does not know the first missing page yet.
  bool pending(PrefixTier& tier, const uint64_t* keys, size_t first_missing, size_t n_pages);
  // A probe is in flight, unanswered; it was started at `started()`.
  bool unanswered(const PrefixTier& tier) const { return id_ && !tier.probe_done(*id_); }
  std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  std::optional<TierProbeId> id_;
  std::chrono::steady_clock::time_point started_, deadline_;
  bool asked_ = false;
};

}  // namespace k25
