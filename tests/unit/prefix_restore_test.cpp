// PrefixRestore and SharedTierProbe against a scripted tier: what is pinned, read, inserted into
// the prefix cache, handed to the sequence and given back to the pool.
#include "kv/prefix_restore.h"

#include <gtest/gtest.h>

#include <set>

namespace k25 {
namespace {

constexpr int kPageTokens = 4;

// Holds the keys in `held`; a restore "reads" `restored` leading pages (`shared` of them from a
// shared tier) and keeps none of the rest.
class ScriptedTier : public PrefixTier {
 public:
  std::set<uint64_t> held;
  size_t restored = 0, shared = 0;
  bool done = false;
  std::vector<CachedPage> chain;  // what begin_restore() was given
  int probes = 0;
  bool probe_answered = false;

  void spill(const CachedPage&, SpillSource) override {}
  bool contains(uint64_t key) const override { return held.count(key) > 0; }
  TierProbeId probe(const uint64_t*, size_t) override {
    ++probes;
    return 7;
  }
  bool probe_done(TierProbeId) const override { return probe_answered; }
  L3RestoreId begin_restore(std::vector<CachedPage> pages) override {
    chain = std::move(pages);
    return 1;
  }
  bool restore_done(L3RestoreId) const override { return done; }
  RestoredPages end_restore(L3RestoreId, std::vector<bool>* kept) override {
    kept->assign(chain.size(), false);
    return {std::min(restored, chain.size()), shared};
  }
  void poll(std::chrono::milliseconds) override {}
  void limit_in_flight(size_t) override {}
  std::chrono::milliseconds read_timeout() const override { return std::chrono::hours(1); }
};

struct Fixture {
  PagePool pool{{kPageTokens, 1, 2}, PagePool::page_bytes_for({kPageTokens, 1, 2}) * 8};
  PrefixCache prefix{pool, 7};
  ScriptedTier tier;
  std::vector<int32_t> tokens = std::vector<int32_t>(5 * kPageTokens);
  std::vector<uint64_t> keys;

  Fixture() {
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(100 + i);
    prefix.chain_keys(tokens.data(), 5, &keys);
  }
  PrefixRestore::Chain chain() const { return {keys.data(), tokens.data(), 5, kPageTokens}; }
};

TEST(PrefixRestore, NothingInTheTierPinsNothing) {
  Fixture f;
  PageId l2 = *f.pool.allocate();
  EXPECT_FALSE(PrefixRestore::begin(f.tier, f.prefix, f.pool, f.chain(), {l2}).has_value());
  EXPECT_EQ(f.pool.ref_count(l2), 1u);  // only the test's own reference
}

TEST(PrefixRestore, RestoredPagesJoinTheCacheAndTheSequenceTheRestGoBack) {
  Fixture f;
  PageId l2 = *f.pool.allocate();                   // page 0 is in L2
  f.tier.held = {f.keys[1], f.keys[2], f.keys[3]};  // pages 1-3 in the tier, page 4 nowhere
  const size_t free_before = f.pool.pages_free();
  std::optional<PrefixRestore> r = PrefixRestore::begin(f.tier, f.prefix, f.pool, f.chain(), {l2});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(f.tier.chain.size(), 3u);  // fresh pages for 1-3, chained to page 0
  EXPECT_EQ(f.tier.chain[0].key, f.keys[1]);
  EXPECT_EQ(f.tier.chain[0].parent, f.keys[0]);
  EXPECT_EQ(f.tier.chain[2].tokens, f.tokens.data() + 3 * kPageTokens);
  EXPECT_EQ(f.pool.pages_free(), free_before - 3);
  EXPECT_EQ(f.pool.ref_count(l2), 2u);  // pinned while the reads run

  EXPECT_FALSE(r->ready(f.tier, PrefixRestore::Clock::now()));
  f.tier.done = true;
  EXPECT_TRUE(r->ready(f.tier, PrefixRestore::Clock::now()));

  f.tier.restored = 2;  // pages 1 and 2 read; page 3 failed
  f.tier.shared = 1;
  std::vector<PageId> adopted;
  PrefixRestore::Outcome outcome =
      r->end(f.tier, f.prefix, f.pool, f.chain(), false,
             [&](const std::vector<PageId>& pages) { adopted = pages; });
  EXPECT_EQ(outcome.from_shared, 1u);
  EXPECT_EQ(outcome.from_disk, 1u);
  ASSERT_EQ(adopted.size(), 3u);
  EXPECT_EQ(adopted[0], l2);
  EXPECT_EQ(adopted[1], f.tier.chain[0].page);
  EXPECT_EQ(adopted[2], f.tier.chain[1].page);
  EXPECT_EQ(f.pool.ref_count(f.tier.chain[2].page), 0u);  // the failed page went back
  // The cache now holds pages 0-2 of the chain.
  EXPECT_EQ(f.prefix.lookup(f.keys.data(), 5, f.tokens.data()).size(), 3u);
  EXPECT_EQ(f.pool.ref_count(l2), 2u);  // the test's reference and the cache's
}

TEST(PrefixRestore, AFinishedSequenceAdoptsNothingButTheCacheKeepsThePages) {
  Fixture f;
  f.tier.held = {f.keys[0], f.keys[1]};
  std::optional<PrefixRestore> r = PrefixRestore::begin(f.tier, f.prefix, f.pool, f.chain(), {});
  ASSERT_TRUE(r.has_value());
  f.tier.restored = 2;
  r->end(f.tier, f.prefix, f.pool, f.chain(), true, nullptr);
  EXPECT_EQ(f.prefix.lookup(f.keys.data(), 5, f.tokens.data()).size(), 2u);
  EXPECT_EQ(f.pool.ref_count(f.tier.chain[0].page), 1u);  // held by the cache only
}

TEST(SharedTierProbe, AsksOnceAndWaitsOnlyForTheAnswer) {
  Fixture f;
  SharedTierProbe probe;
  EXPECT_TRUE(probe.pending(f.tier, f.keys.data(), 1, 5));
  EXPECT_TRUE(probe.pending(f.tier, f.keys.data(), 1, 5));
  EXPECT_EQ(f.tier.probes, 1);
  f.tier.probe_answered = true;
  EXPECT_FALSE(probe.pending(f.tier, f.keys.data(), 1, 5));
  EXPECT_FALSE(probe.pending(f.tier, f.keys.data(), 1, 5));
  EXPECT_EQ(f.tier.probes, 1);  // never asked again for this prompt
}

TEST(SharedTierProbe, ATierThatKnowsThePageIsNotAsked) {
  Fixture f;
  f.tier.held = {f.keys[1]};
  SharedTierProbe probe;
  EXPECT_FALSE(probe.pending(f.tier, f.keys.data(), 1, 5));
  EXPECT_EQ(f.tier.probes, 0);
}

}  // namespace
}  // namespace k25
