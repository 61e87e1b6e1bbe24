#include "kv/session_prefetcher.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace k25 {
namespace {

using Clock = SessionPrefetcher::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

SessionPrefetcher::Chain chain_of(uint64_t first_key, size_t n_pages) {
  SessionPrefetcher::Chain c;
  for (size_t i = 0; i < n_pages; ++i) c.keys.push_back(first_key + i);
  c.tokens.assign(n_pages * 4, 7);
  return c;
}

TEST(SessionPrefetcher, ASessionIsHotAtItsKthTurnAndDueLeadBeforeTheNext) {
  SessionPrefetcher p(3);
  const Clock::time_point t0 = Clock::now();
  p.record(1, t0, chain_of(100, 2));
  p.record(1, t0 + seconds(3), chain_of(100, 3));
  EXPECT_EQ(p.turns(1), 2);
  EXPECT_FALSE(p.next_due(milliseconds(500)).has_value());  // two turns: not hot
  EXPECT_TRUE(p.due(t0 + seconds(6), milliseconds(500)).empty());
  p.record(1, t0 + seconds(5), chain_of(100, 4));  // spacings 3 s and 2 s: next at +7.5 s
  EXPECT_EQ(p.turns(1), 3);
  ASSERT_TRUE(p.next_due(milliseconds(500)).has_value());
  EXPECT_EQ(*p.next_due(milliseconds(500)), t0 + milliseconds(7000));
  EXPECT_TRUE(p.due(t0 + milliseconds(6900), milliseconds(500)).empty());
  std::vector<const SessionPrefetcher::Chain*> due =
      p.due(t0 + milliseconds(7000), milliseconds(500));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0]->keys.size(), 4u);  // the last turn's chain
  EXPECT_EQ(due[0]->keys.front(), 100u);
  // Once per turn.
  EXPECT_TRUE(p.due(t0 + milliseconds(7100), milliseconds(500)).empty());
  EXPECT_FALSE(p.next_due(milliseconds(500)).has_value());
  // The next turn re-arms it; the oldest of the K turns drops out (spacings 2 s and 2.5 s).
  p.record(1, t0 + milliseconds(7500), chain_of(100, 5));
  EXPECT_EQ(*p.next_due(milliseconds(0)), t0 + milliseconds(9750));
}

TEST(SessionPrefetcher, ASessionQuietForLongerThanItsSpacingIsNotFetched) {
  SessionPrefetcher p(3);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) p.record(5, t0 + seconds(2 * i), chain_of(1, 1));
  // Next predicted at +6 s; at +8.5 s it is more than a spacing (2 s) late.
  EXPECT_TRUE(p.due(t0 + milliseconds(8500), milliseconds(100)).empty());
  EXPECT_FALSE(p.next_due(milliseconds(100)).has_value());  // and not asked again
}

TEST(SessionPrefetcher, ATurnWithoutFullPagesIsCountedButNotFetched) {
  SessionPrefetcher p(3);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 3; ++i) p.record(9, t0 + seconds(i), {});
  EXPECT_EQ(p.turns(9), 3);
  EXPECT_TRUE(p.due(t0 + seconds(3), seconds(1)).empty());
}

TEST(SessionPrefetcher, TheBoundedHistoryKeepsHotSessionsOverOneOffs) {
  SessionPrefetcher p(3, 4);
  const Clock::time_point t0 = Clock::now();
  for (uint64_t s = 1; s <= 2; ++s) {
    for (int i = 0; i < 3; ++i) p.record(s, t0 + seconds(i), chain_of(10 * s, 1));
  }
  for (uint64_t s = 100; s < 110; ++s) p.record(s, t0 + seconds(10 + s), chain_of(s, 1));
  EXPECT_EQ(p.tracked(), 4u);
  EXPECT_EQ(p.turns(1), 3);
  EXPECT_EQ(p.turns(2), 3);
  EXPECT_EQ(p.turns(109), 1);  // the newest one-off survives its own record
  EXPECT_EQ(p.turns(100), 0);
}

TEST(SessionPrefetcher, RefusesAKThatCannotMeasureASpacing) {
  EXPECT_THROW(SessionPrefetcher(1), Error);
  EXPECT_THROW(SessionPrefetcher(SessionPrefetcher::kMaxK + 1), Error);
  EXPECT_THROW(SessionPrefetcher(3, 0), Error);
}

}  // namespace
}  // namespace k25
