#include "engine/elastic_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"

namespace k25 {
namespace {

constexpr int kGold = 100, kSilver = 50, kBronze = 10;

SchedulerOptions options(int budget, int micro, int max_batch = 24) {
  SchedulerOptions o;
  o.step_token_budget = budget;
  o.micro_task_tokens = micro;
  o.max_batch_size = max_batch;
  return o;
}

// A running sequence that has computed `computed` of `tokens` tokens (pages to match).
SeqView running(int priority, int tokens, int computed, uint64_t arrival, int page_tokens = 16) {
  SeqView v;
  v.running = true;
  v.priority = priority;
  v.n_tokens = tokens;
  v.n_computed = computed;
  v.pages_held = (computed + page_tokens - 1) / page_tokens;
  v.arrival = arrival;
  return v;
}

SeqView queued(int priority, int tokens, uint64_t arrival, double waited_s = 0) {
  SeqView v;
  v.priority = priority;
  v.n_tokens = tokens;
  v.arrival = arrival;
  v.waited_s = waited_s;
  return v;
}

PoolView plenty() {
  return {1'000'000, 16};
}

const TaskDescriptor* task_of(const StepDecision& d, int seq) {
  for (const TaskDescriptor& t : d.tasks) {
    if (t.seq == seq) return &t;
  }
  return nullptr;
}

int total_tokens(const StepDecision& d) {
  int n = 0;
  for (const TaskDescriptor& t : d.tasks) n += t.length;
  return n;
}

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(ElasticScheduler, EveryDecodeTokenThenPrefillWithinTheBudget) {
  ElasticScheduler s(options(/*budget=*/16, /*micro=*/4));
  std::vector<SeqView> seqs = {running(kSilver, 100, 0, 1), running(kSilver, 11, 10, 2),
                               running(kSilver, 30, 0, 3), running(kSilver, 6, 5, 4)};
  StepDecision d = s.plan(seqs, plenty());
  EXPECT_EQ(total_tokens(d), 16);
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 1);
  EXPECT_EQ(task_of(d, 1)->start, 10);
  ASSERT_NE(task_of(d, 3), nullptr);
  EXPECT_EQ(task_of(d, 3)->length, 1);
  // 14 prefill tokens left: the best-ranked prompt (same class, shorter remainder) takes them.
  ASSERT_NE(task_of(d, 2), nullptr);
  EXPECT_EQ(task_of(d, 2)->length, 14);
  EXPECT_EQ(task_of(d, 0), nullptr);
}

TEST(ElasticScheduler, PromptsThatOneMicroTaskFinishesGoFirstWhateverTheirClass) {
  ElasticScheduler s(options(/*budget=*/40, /*micro=*/16));
  std::vector<SeqView> seqs = {running(kGold, 500, 0, 1), running(kBronze, 12, 0, 2),
                               running(kSilver, 16, 0, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 12);
  ASSERT_NE(task_of(d, 2), nullptr);
  EXPECT_EQ(task_of(d, 2)->length, 16);
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 12);  // the gold long prompt takes the rest
}

TEST(ElasticScheduler, ALongPromptIsCutIntoMicroTasksSoAShortOneGoesFirst) {
  ElasticScheduler s(options(/*budget=*/64, /*micro=*/32));
  // The long prompt arrived first, with the same priority.
  std::vector<SeqView> seqs = {running(kSilver, 5000, 0, 1), running(kSilver, 10, 0, 2)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 10);  // the whole short prompt: its first token comes now
  EXPECT_EQ(task_of(d, 0)->length, 54);  // the rest of the budget, not all 5000
  EXPECT_EQ(s.pending_micro_tasks(seqs), (5000 + 31) / 32 + 1);
}

TEST(ElasticScheduler, ALoneLongPromptFillsTheBudget) {
  ElasticScheduler s(options(/*budget=*/100, /*micro=*/32));
  StepDecision d = s.plan({running(kSilver, 5000, 64, 1)}, plenty());
  ASSERT_EQ(d.tasks.size(), 1u);
  EXPECT_EQ(d.tasks[0].start, 64);
  EXPECT_EQ(d.tasks[0].length, 100);
}

TEST(ElasticScheduler, HigherPriorityPrefillsFirst) {
  ElasticScheduler s(options(/*budget=*/32, /*micro=*/32));
  std::vector<SeqView> seqs = {running(kBronze, 100, 0, 1), running(kGold, 100, 0, 2),
                               running(kSilver, 100, 0, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_EQ(d.tasks.size(), 1u);
  EXPECT_EQ(d.tasks[0].seq, 1);
}

TEST(ElasticScheduler, PrefillProgressesEvenWhenDecodeTokensUseTheBudget) {
  ElasticScheduler s(options(/*budget=*/2, /*micro=*/8));
  std::vector<SeqView> seqs = {running(kSilver, 11, 10, 1), running(kSilver, 11, 10, 2),
                               running(kSilver, 50, 0, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 2), nullptr);
  EXPECT_EQ(task_of(d, 2)->length, 1);
}

TEST(ElasticScheduler, AdmitsByPriorityIntoFreeSlots) {
  ElasticScheduler s(options(512, 128, /*max_batch=*/2));
  std::vector<SeqView> seqs = {queued(kBronze, 10, 1), queued(kSilver, 10, 2),
                               queued(kGold, 10, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_EQ(d.admit.size(), 2u);
  EXPECT_EQ(d.admit[0], 2);
  EXPECT_EQ(d.admit[1], 1);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(task_of(d, 0), nullptr);  // still queued
  EXPECT_NE(task_of(d, 2), nullptr);  // admitted requests run in the same step
}

TEST(ElasticScheduler, AgingBoundsHowLongBronzeWaits) {
  SchedulerOptions o = options(512, 128, /*max_batch=*/1);
  o.aging_per_second = 10;
  ElasticScheduler s(o);
  // Bronze has waited 9 s (10 + 90 = 100): ties with a fresh gold and wins on arrival.
  std::vector<SeqView> seqs = {queued(kBronze, 10, 1, 9.0), queued(kGold, 10, 2, 0.0)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_EQ(d.admit.size(), 1u);
  EXPECT_EQ(d.admit[0], 0);
  // Less waiting: gold goes first.
  seqs[0].waited_s = 8.0;
  d = s.plan(seqs, plenty());
  ASSERT_EQ(d.admit.size(), 1u);
  EXPECT_EQ(d.admit[0], 1);
}

TEST(ElasticScheduler, GoldPreemptsTheLowestPriorityRunningSequence) {
  ElasticScheduler s(options(512, 128, /*max_batch=*/2));
  std::vector<SeqView> seqs = {running(kSilver, 21, 20, 1), running(kBronze, 21, 20, 2),
                               queued(kGold, 10, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0], 1);
  EXPECT_TRUE(d.drop_kv.empty());  // memory is plentiful: the bronze keeps its KV
  ASSERT_EQ(d.admit.size(), 1u);
  EXPECT_EQ(d.admit[0], 2);
  EXPECT_EQ(task_of(d, 1), nullptr);
  EXPECT_NE(task_of(d, 0), nullptr);
}

TEST(ElasticScheduler, SilverDoesNotPreempt) {
  ElasticScheduler s(options(512, 128, /*max_batch=*/1));
  std::vector<SeqView> seqs = {running(kBronze, 21, 20, 1), queued(kSilver, 10, 2)};
  StepDecision d = s.plan(seqs, plenty());
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_TRUE(d.admit.empty());
  EXPECT_NE(task_of(d, 0), nullptr);
}

TEST(ElasticScheduler, MemoryShortageDropsLowerPriorityKvFirst) {
  ElasticScheduler s(options(512, 16));
  // 4-token pages. A parked (preempted) bronze holds 5 pages; a running silver decodes; a gold
  // arrival needs 4 pages for its first micro-task with only 1 free.
  SeqView parked = queued(kBronze, 21, 1);
  parked.n_computed = 20;
  parked.pages_held = 5;
  std::vector<SeqView> seqs = {parked, running(kSilver, 9, 8, 2, 4), queued(kGold, 16, 3)};
  StepDecision d = s.plan(seqs, {1, 4});
  EXPECT_TRUE(contains(d.drop_kv, 0));
  EXPECT_TRUE(contains(d.admit, 2));
  EXPECT_TRUE(d.preempt.empty());  // the silver keeps running
  EXPECT_NE(task_of(d, 1), nullptr);
  ASSERT_NE(task_of(d, 2), nullptr);
  EXPECT_EQ(task_of(d, 2)->length, 16);
}

TEST(ElasticScheduler, MemoryShortagePreemptsRunningLowerPriorityWithoutItsKv) {
  ElasticScheduler s(options(512, 16));
  // The pool is full: a bronze holds 4 pages, a gold prompt waits for 4.
  std::vector<SeqView> seqs = {running(kBronze, 17, 16, 1, 4), queued(kGold, 16, 2)};
  StepDecision d = s.plan(seqs, {0, 4});
  EXPECT_TRUE(contains(d.preempt, 0));
  EXPECT_TRUE(contains(d.drop_kv, 0));
  EXPECT_TRUE(contains(d.admit, 1));
  EXPECT_EQ(task_of(d, 0), nullptr);
}

TEST(ElasticScheduler, NobodyIsEvictedForAnEqualOrLowerPriority) {
  ElasticScheduler s(options(512, 16));
  std::vector<SeqView> seqs = {running(kGold, 17, 16, 1, 4), queued(kSilver, 16, 2)};
  StepDecision d = s.plan(seqs, {0, 4});
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_TRUE(d.drop_kv.empty());
  EXPECT_TRUE(d.admit.empty());
  // The gold needs a fifth page for its next token and none is free: no task, nothing evicted.
  EXPECT_TRUE(d.tasks.empty());
}

TEST(ElasticScheduler, PrefillShrinksToTheFreePages) {
  ElasticScheduler s(options(512, 64));
  StepDecision d = s.plan({running(kSilver, 100, 0, 1)}, {3, 4});
  ASSERT_EQ(d.tasks.size(), 1u);
  EXPECT_EQ(d.tasks[0].length, 12);
}

TEST(ElasticScheduler, RejectsBadOptions) {
  EXPECT_THROW(ElasticScheduler(options(0, 8)), Error);
  EXPECT_THROW(ElasticScheduler(options(8, 0)), Error);
  EXPECT_THROW(ElasticScheduler(options(8, 8, 0)), Error);
}

}  // namespace
}  // namespace k25

namespace k25 {
namespace {

// A token at position p costs 1 + position_cost * p: deep in a long prompt, a step holds fewer
// tokens, so steps stay about as long as at the start.
TEST(ElasticScheduler, PositionCostShrinksLongContextPrefill) {
  SchedulerOptions o = options(/*budget=*/512, /*micro=*/128);
  o.position_cost = 0.01;
  ElasticScheduler s(o);
  // At position 0: n + 0.01 * n(n-1)/2 <= 512 -> 235 tokens (509.95; 236 would cost 513.3).
  StepDecision fresh = s.plan({running(kSilver, 4000, 0, 1)}, plenty());
  ASSERT_NE(task_of(fresh, 0), nullptr);
  EXPECT_EQ(task_of(fresh, 0)->length, 235);
  // At position 3000 each token costs about 31: 16 tokens (16 + 0.01 * (16 * 3000 + 120) = 497).
  StepDecision deep = s.plan({running(kSilver, 4000, 3000, 1)}, plenty());
  ASSERT_NE(task_of(deep, 0), nullptr);
  EXPECT_EQ(task_of(deep, 0)->length, 16);
}

TEST(ElasticScheduler, PositionCostChargesDecodeTokensButPrefillKeepsItsFloor) {
  SchedulerOptions o = options(/*budget=*/64, /*micro=*/32);
  o.position_cost = 0.01;
  ElasticScheduler s(o);
  // Two decode tokens at position 3000 cost 31 each: 2 budget points are left, and the prompt
  // gets the prefill floor instead, a quarter of the budget: 14 tokens (14 + 0.01 * 91 <= 16).
  std::vector<SeqView> seqs = {running(kSilver, 3001, 3000, 1), running(kSilver, 3001, 3000, 2),
                               running(kSilver, 500, 0, 3)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 0), nullptr);
  ASSERT_NE(task_of(d, 1), nullptr);
  ASSERT_NE(task_of(d, 2), nullptr);
  EXPECT_EQ(task_of(d, 2)->length, 14);
  // Without the position cost the prompt takes the 62 tokens left.
  EXPECT_EQ(task_of(ElasticScheduler(options(64, 32)).plan(seqs, plenty()), 2)->length, 62);
}

TEST(ElasticScheduler, PrefillGetsItsFloorWhenDecodeTokensUseTheWholeBudget) {
  SchedulerOptions o = options(/*budget=*/64, /*micro=*/32);
  ElasticScheduler s(o);
  std::vector<SeqView> seqs;
  for (int i = 0; i < 80; ++i) seqs.push_back(running(kSilver, 11, 10, i));
  seqs.push_back(running(kSilver, 500, 0, 100));
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 80), nullptr);
  EXPECT_EQ(task_of(d, 80)->length, 16);  // prefill_floor 0.25 of 64
  o.prefill_floor = 0;
  // Without a floor the prompt gets the single token every step grants.
  EXPECT_EQ(task_of(ElasticScheduler(o).plan(seqs, plenty()), 80)->length, 1);
}

TEST(ElasticScheduler, AShortPromptLongerThanAMicroTaskStillGoesFirstWhenTheStepFinishesIt) {
  ElasticScheduler s(options(/*budget=*/512, /*micro=*/128));
  std::vector<SeqView> seqs = {running(kGold, 5000, 0, 1), running(kSilver, 300, 0, 2)};
  StepDecision d = s.plan(seqs, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 300);
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 212);
  // A prompt the step cannot finish is not a finisher: the gold one comes first.
  std::vector<SeqView> longer = {running(kGold, 5000, 0, 1), running(kSilver, 600, 0, 2)};
  StepDecision e = s.plan(longer, plenty());
  ASSERT_NE(task_of(e, 0), nullptr);
  EXPECT_EQ(task_of(e, 0)->length, 512);
  EXPECT_EQ(task_of(e, 1), nullptr);
}

TEST(ElasticScheduler, ALongPromptLeftWithoutServiceAgesPastFreshShortOnes) {
  ElasticScheduler s(options(/*budget=*/64, /*micro=*/32));
  auto long_prompt = [](double waited_s) {
    SeqView v = running(kSilver, 5000, 0, 1);
    v.waited_s = waited_s;
    return v;
  };
  // Two seconds without service: fresh short prompts still come first (finisher_lead 100 points
  // at 10 points per second is 10 seconds' lead).
  StepDecision soon =
      s.plan({long_prompt(2), running(kSilver, 40, 0, 2), running(kSilver, 40, 0, 3)}, plenty());
  ASSERT_NE(task_of(soon, 1), nullptr);
  EXPECT_EQ(task_of(soon, 1)->length, 40);
  EXPECT_EQ(task_of(soon, 0), nullptr);  // the second short one took the rest (24 tokens)
  // Eleven seconds: the long prompt has aged past them and takes the budget.
  StepDecision late =
      s.plan({long_prompt(11), running(kSilver, 40, 0, 2), running(kSilver, 40, 0, 3)}, plenty());
  ASSERT_NE(task_of(late, 0), nullptr);
  EXPECT_EQ(task_of(late, 0)->length, 64);
}

// Two long prompts of one class: the one prefilled last step keeps the budget while the other
// ages (without the lead they would alternate every second and both finish late), until the
// other has waited past the lead; a gold prompt still comes first.
TEST(ElasticScheduler, ThePromptPrefilledLastStepKeepsItsTurnOverItsClass) {
  ElasticScheduler s(options(/*budget=*/64, /*micro=*/32));
  auto served = [](int computed) {
    SeqView v = running(kSilver, 5000, computed, 1);
    v.waited_s = 0.2;
    v.continues_prefill = true;
    return v;
  };
  auto waiting = [](double waited_s) {
    SeqView v = running(kSilver, 3000, 0, 2);
    v.waited_s = waited_s;
    return v;
  };
  // Three seconds: the waiting prompt ranks 30 points up, less than the 40-point lead.
  StepDecision d = s.plan({served(1024), waiting(3)}, plenty());
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 64);
  EXPECT_EQ(task_of(d, 1), nullptr);
  // Without the lead the shorter, aged one takes the step: the two would take turns.
  SeqView not_continuing = served(1024);
  not_continuing.continues_prefill = false;
  d = s.plan({not_continuing, waiting(3)}, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 64);
  // Six seconds: aged past the lead, the waiting prompt has earned its class a turn; the started
  // one takes it and the waiting one counts as served (its aging restarts).
  d = s.plan({served(1024), waiting(6)}, plenty());
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 64);
  EXPECT_EQ(task_of(d, 1), nullptr);
  EXPECT_EQ(d.yielded, std::vector<int>{1});
  // A fresh gold prompt outranks a silver one that continues.
  SeqView gold = running(kGold, 3000, 0, 3);
  d = s.plan({served(1024), gold}, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 64);
  EXPECT_EQ(task_of(d, 0), nullptr);
}

TEST(ElasticScheduler, AgingStillDecidesWhichClassTheStartedPromptsTurnGoesTo) {
  ElasticScheduler s(options(/*budget=*/64, /*micro=*/32));
  SeqView silver_started = running(kSilver, 5000, 1024, 1);
  silver_started.waited_s = 0.2;
  silver_started.continues_prefill = true;
  // A bronze prompt 10 s without service (110 points) outranks the started silver one (92): it
  // is served, not passed over for a prompt of another class.
  SeqView bronze = running(kBronze, 3000, 0, 2);
  bronze.waited_s = 10;
  StepDecision d = s.plan({silver_started, bronze}, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 64);
  EXPECT_EQ(task_of(d, 0), nullptr);
  EXPECT_TRUE(d.yielded.empty());
  // A short prompt of its class that the step can finish still goes first, and is not yielded.
  SeqView short_prompt = running(kSilver, 20, 0, 3);
  SeqView aged = running(kSilver, 3000, 0, 4);
  aged.waited_s = 6;
  d = s.plan({silver_started, short_prompt, aged}, plenty());
  ASSERT_NE(task_of(d, 1), nullptr);
  EXPECT_EQ(task_of(d, 1)->length, 20);
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 44);
  EXPECT_EQ(task_of(d, 2), nullptr);
  EXPECT_EQ(d.yielded, std::vector<int>{2});
}

TEST(ElasticScheduler, GoldAdmissionLooksPastAQueuedRequestThatCannotGetASlot) {
  ElasticScheduler s(options(512, 128, /*max_batch=*/2));
  // The aged silver request ranks first but may not preempt; the gold one behind it may.
  std::vector<SeqView> seqs = {running(kBronze, 20, 19, 1), running(kBronze, 20, 19, 2),
                               queued(kSilver, 10, 3, /*waited_s=*/10), queued(kGold, 10, 4)};
  StepDecision d = s.plan(seqs, plenty());
  EXPECT_TRUE(contains(d.admit, 3));
  EXPECT_FALSE(contains(d.admit, 2));
  ASSERT_EQ(d.preempt.size(), 1u);
}

TEST(ElasticScheduler, SetStepCostReplacesTheConfiguredOne) {
  ElasticScheduler s(options(/*budget=*/16, /*micro=*/16));
  s.set_step_cost(100, 0);
  StepDecision d = s.plan({running(kSilver, 5000, 0, 1)}, plenty());
  ASSERT_NE(task_of(d, 0), nullptr);
  EXPECT_EQ(task_of(d, 0)->length, 100);
  EXPECT_THROW(s.set_step_cost(0, 0), Error);
  EXPECT_THROW(s.set_step_cost(10, -1), Error);
}

TEST(ElasticScheduler, RejectsNegativePositionCost) {
  SchedulerOptions o = options(64, 32);
  o.position_cost = -0.5;
  EXPECT_THROW(ElasticScheduler{o}, Error);
}

}  // namespace
}  // namespace k25
