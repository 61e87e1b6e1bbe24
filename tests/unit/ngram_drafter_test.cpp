#include "flash/ngram_drafter.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/speculation.h"

namespace k25 {
namespace {

using Tokens = std::vector<TokenId>;

TEST(NgramDrafter, ProposesWhatFollowedTheLatestEarlierOccurrenceOfTheLongestSuffix) {
  const NgramDrafter drafter;
  // The trigram 1 2 3 occurred at 0 (followed by 4 5 6) and at 6 (followed by 7 8): the latest.
  EXPECT_EQ(drafter.draft({1, 2, 3, 4, 5, 6, 1, 2, 3, 7, 8, 9, 1, 2, 3}, 2), (Tokens{7, 8}));
  // The k tokens after the match, fewer when the text ends first.
  EXPECT_EQ(drafter.draft({1, 2, 3, 4, 1, 2, 3}, 8), (Tokens{4, 1, 2, 3}));
  // A longer suffix wins over a later shorter one: "5 3" is at 1 (-> 9), "3" alone at 5 (-> 6).
  EXPECT_EQ(drafter.draft({4, 5, 3, 9, 8, 3, 6, 5, 3}, 1), (Tokens{9}));
  // Down to one token.
  EXPECT_EQ(drafter.draft({7, 1, 2, 7}, 3), (Tokens{1, 2, 7}));
  // Context beyond three tokens picks the occurrence: "9 1 2 3" at 0 (-> 4) over the later
  // "1 2 3" at 6 (-> 5); with suffixes of at most 3 tokens the later one wins.
  const Tokens quoted = {9, 1, 2, 3, 4, 8, 1, 2, 3, 5, 9, 1, 2, 3};
  EXPECT_EQ(drafter.draft(quoted, 1), (Tokens{4}));
  EXPECT_EQ(NgramDrafter(3, 1).draft(quoted, 1), (Tokens{5}));
}

TEST(NgramDrafter, ProposesNothingWithoutAnEarlierOccurrence) {
  const NgramDrafter drafter;
  EXPECT_TRUE(drafter.draft({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(drafter.draft({}, 4).empty());
  EXPECT_TRUE(drafter.draft({1}, 4).empty());
  EXPECT_TRUE(drafter.draft({1, 1, 1}, 0).empty());
  // A repeated token: its previous occurrence is followed by itself.
  EXPECT_EQ(drafter.draft({1, 1}, 4), (Tokens{1}));
  // min_ngram 2: a single matching token is not enough.
  EXPECT_TRUE(NgramDrafter(3, 2).draft({7, 1, 2, 7}, 3).empty());
  EXPECT_EQ(NgramDrafter(3, 2).draft({7, 1, 2, 7, 1}, 3), (Tokens{2, 7, 1}));
}

TEST(NgramDrafter, RejectsBadLengths) {
  EXPECT_THROW(NgramDrafter(3, 0), Error);
  EXPECT_THROW(NgramDrafter(1, 2), Error);
}

TEST(Speculation, ModesParseByName) {
  EXPECT_EQ(parse_speculative_mode("off"), SpeculativeMode::kOff);
  EXPECT_EQ(parse_speculative_mode("ngram"), SpeculativeMode::kNgram);
  EXPECT_EQ(parse_speculative_mode("auto"), SpeculativeMode::kAuto);
  EXPECT_EQ(parse_speculative_mode("self"), SpeculativeMode::kSelf);
  EXPECT_EQ(parse_speculative_mode("Ngram"), std::nullopt);
  EXPECT_STREQ(speculative_mode_name(SpeculativeMode::kNgram), "ngram");
}

TEST(Speculation, DraftLengthFollowsAcceptanceWithinItsBounds) {
  SpeculationOptions o;
  o.initial_draft = 2;
  o.min_draft = 1;
  o.max_draft = 3;
  DraftLength k(o);
  EXPECT_EQ(k.next(), 2);
  k.observe(2, 2);
  EXPECT_EQ(k.next(), 3);
  k.observe(3, 3);
  EXPECT_EQ(k.next(), 3);  // at the bound
  k.observe(3, 1);
  EXPECT_EQ(k.next(), 2);
  k.observe(2, 0);
  k.observe(1, 0);
  EXPECT_EQ(k.next(), 1);  // at the lower bound
  k.observe(0, 0);         // no draft: nothing learned
  EXPECT_EQ(k.next(), 1);
}

TEST(Speculation, FailedDraftsPauseDraftingForDoublingStepCounts) {
  DraftLength k(SpeculationOptions{});
  EXPECT_TRUE(k.take_turn());
  const auto paused_steps = [&] {
    int n = 0;
    while (!k.take_turn()) ++n;
    return n;
  };
  k.observe(4, 0);
  EXPECT_EQ(paused_steps(), 1);
  k.observe(3, 0);
  EXPECT_EQ(paused_steps(), 2);
  k.observe(2, 0);
  EXPECT_EQ(paused_steps(), 4);
  for (int i = 0; i < 6; ++i) {
    k.observe(1, 0);
    paused_steps();
  }
  k.observe(1, 0);
  EXPECT_EQ(paused_steps(), DraftLength::kMaxPause);
  k.observe(1, 1);  // a draft that paid: no pause, and the next failure pauses 1 step again
  EXPECT_TRUE(k.take_turn());
  k.observe(2, 0);
  EXPECT_EQ(paused_steps(), 1);
}

TEST(Speculation, OptionsAreValidated) {
  SpeculationOptions o;
  EXPECT_NO_THROW(validate(o));
  o.max_batch = -1;
  EXPECT_THROW(validate(o), Error);
  o = {};
  o.min_draft = 0;
  EXPECT_THROW(validate(o), Error);
  o = {};
  o.initial_draft = 9;
  EXPECT_THROW(validate(o), Error);
}

}  // namespace
}  // namespace k25
