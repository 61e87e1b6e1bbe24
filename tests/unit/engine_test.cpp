#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "engine/scheduling_policy.h"
#include "fake_model.h"

namespace k25 {
namespace {

using testing::FakeModel;
using testing::kBos;
using testing::kEos;
using testing::letter;

// Collects one request's events; wait() returns once Finished arrived.
class Collector {
 public:
  EventCallback callback() {
    return [this](const GenerationEvent& e) {
      std::lock_guard lock(mutex_);
      events_.push_back(e);
      if (e.kind == GenerationEvent::Kind::Finished) cv_.notify_all();
    };
  }
  const GenerationEvent& wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] {
      return !events_.empty() && events_.back().kind == GenerationEvent::Kind::Finished;
    });
    return events_.back();
  }
  std::string text() {
    wait();
    std::string out;
    for (const GenerationEvent& e : events_) out += e.text;
    return out;
  }
  std::vector<GenerationEvent> events() {
    wait();
    return events_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<GenerationEvent> events_;
};

GenerationRequest greedy(std::vector<TokenId> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

EngineOptions small_options() {
  EngineOptions o;
  o.n_threads = 1;
  o.max_batch_size = 4;
  o.max_queue = 8;
  return o;
}

void wait_until_idle(const Engine& engine) {
  while (engine.n_active() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(Engine, GreedyFollowsTheModelAndStopsAtMaxTokens) {
  FakeModel model;
  Engine engine(model, small_options());
  Collector c;
  ASSERT_EQ(engine.submit(greedy({kBos, letter('a')}, 5), c.callback()).status,
            SubmitStatus::Accepted);
  EXPECT_EQ(c.text(), "bcdef");
  const GenerationEvent& done = c.wait();
  EXPECT_EQ(done.finish_reason, FinishReason::Length);
  EXPECT_EQ(done.prompt_tokens, 2);
  EXPECT_EQ(done.completion_tokens, 5);
  EXPECT_GE(done.total_ms, done.ttft_ms);
  EXPECT_EQ(engine.stats().completion_tokens.load(), 5u);
}

TEST(Engine, EndOfGenerationTokenStopsWithoutText) {
  FakeModel model;
  model.set_next(letter('c'), kEos);
  Engine engine(model, small_options());
  Collector c;
  engine.submit(greedy({kBos, letter('a')}, 20), c.callback());
  EXPECT_EQ(c.text(), "bc");
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Stop);
}

TEST(Engine, ChatTurnEndTokenStops) {
  FakeModel model;
  Engine engine(model, small_options());
  Collector c;
  GenerationRequest r = greedy({kBos, letter('a')}, 20);
  r.stop_tokens = {letter('e')};
  engine.submit(r, c.callback());
  EXPECT_EQ(c.text(), "bcd");
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Stop);
}

TEST(Engine, StopStringIsNeverSentEvenInPart) {
  FakeModel model;
  Engine engine(model, small_options());
  Collector c;
  GenerationRequest r = greedy({kBos, letter('a')}, 20);
  r.stop = {"def"};
  engine.submit(r, c.callback());
  for (const GenerationEvent& e : c.events()) {
    EXPECT_EQ(e.text.find('d'), std::string::npos) << "event text '" << e.text << "'";
  }
  EXPECT_EQ(c.text(), "bc");
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Stop);
}

TEST(Engine, HeldBackTextIsReleasedAtTheEnd) {
  FakeModel model;
  Engine engine(model, small_options());
  Collector c;
  GenerationRequest r = greedy({kBos, letter('a')}, 3);
  r.stop = {"dx"};  // "d" may start the stop string, so it waits; the length limit releases it
  engine.submit(r, c.callback());
  EXPECT_EQ(c.text(), "bcd");
  EXPECT_EQ(c.wait().text, "d");
}

TEST(Engine, MultiByteCharactersAreNeverSplitAcrossEvents) {
  FakeModel model;
  model.set_next(letter('a'), testing::kByteC3);  // a → 0xC3 → 0xA9 → ... "é"
  model.set_next(testing::kByteA9, letter('z'));
  Engine engine(model, small_options());
  Collector c;
  engine.submit(greedy({kBos, letter('a')}, 3), c.callback());
  std::vector<GenerationEvent> events = c.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].text, "");
  EXPECT_EQ(events[1].text, "\xC3\xA9");
  EXPECT_EQ(events[2].text, "z");
}

TEST(Engine, LogprobsComeFromTheRawLogits) {
  FakeModel model;
  Engine engine(model, small_options());
  Collector c;
  GenerationRequest r = greedy({kBos, letter('a')}, 2);
  r.top_logprobs = 2;
  engine.submit(r, c.callback());
  std::vector<GenerationEvent> events = c.events();
  ASSERT_TRUE(events[0].logprobs.has_value());
  const TokenLogprobs& lp = *events[0].logprobs;
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, letter('b'));
  EXPECT_EQ(lp.top[1].first, letter('c'));
  EXPECT_FLOAT_EQ(lp.logprob, lp.top[0].second);
  EXPECT_LT(lp.logprob, 0.0f);
}

TEST(Engine, RunningSequencesShareOneForwardCall) {
  FakeModel model;
  model.hold();
  Engine engine(model, small_options());
  Collector a, b, c;
  engine.submit(greedy({kBos, letter('a')}, 4), a.callback());
  model.wait_for_forward_calls(1);  // a's prefill is inside forward; b and c queue meanwhile
  engine.submit(greedy({kBos, letter('h')}, 4), b.callback());
  engine.submit(greedy({kBos, letter('p')}, 4), c.callback());
  model.release();
  EXPECT_EQ(a.text(), "bcde");
  EXPECT_EQ(b.text(), "ijkl");
  EXPECT_EQ(c.text(), "qrst");
  EXPECT_EQ(model.max_seqs_in_batch(), 3);
}

TEST(Engine, CancelFinishesTheRequestAndFreesItsKv) {
  FakeModel model;
  model.hold();
  Engine engine(model, small_options());
  Collector running, waiting;
  RequestId r1 = engine.submit(greedy({kBos, letter('a')}, 50), running.callback()).id;
  model.wait_for_forward_calls(1);
  RequestId r2 = engine.submit(greedy({kBos, letter('a')}, 50), waiting.callback()).id;
  engine.cancel(r1);
  engine.cancel(r2);
  model.release();
  EXPECT_EQ(running.wait().finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(waiting.wait().finish_reason, FinishReason::Cancelled);
  wait_until_idle(engine);
  EXPECT_EQ(engine.stats().kv_bytes_used.load(), 0u);
  EXPECT_EQ(engine.stats().requests_finished[static_cast<int>(FinishReason::Cancelled)].load(), 2u);
}

TEST(Engine, FullQueueRejectsNewRequests) {
  FakeModel model;
  model.hold();
  EngineOptions o = small_options();
  o.max_batch_size = 1;
  o.max_queue = 1;
  Engine engine(model, o);
  Collector a, b, c;
  EXPECT_EQ(engine.submit(greedy({kBos, letter('a')}, 2), a.callback()).status,
            SubmitStatus::Accepted);
  EXPECT_EQ(engine.submit(greedy({kBos, letter('a')}, 2), b.callback()).status,
            SubmitStatus::Accepted);
  SubmitResult full = engine.submit(greedy({kBos, letter('a')}, 2), c.callback());
  EXPECT_EQ(full.status, SubmitStatus::QueueFull);
  EXPECT_NE(full.message.find("queue"), std::string::npos);
  model.release();
  a.wait();
  b.wait();
}

TEST(Engine, RejectsPromptsThatDoNotFit) {
  FakeModel model(/*context_length=*/8);
  Engine engine(model, small_options());
  Collector c;
  EXPECT_EQ(engine.submit(greedy({}, 2), c.callback()).status, SubmitStatus::Invalid);
  std::vector<TokenId> long_prompt(8, letter('a'));
  SubmitResult r = engine.submit(greedy(long_prompt, 2), c.callback());
  EXPECT_EQ(r.status, SubmitStatus::Invalid);
  EXPECT_NE(r.message.find("context"), std::string::npos);
  EXPECT_EQ(engine.submit(greedy({999}, 2), c.callback()).status, SubmitStatus::Invalid);
  GenerationRequest bad = greedy({kBos}, 2);
  bad.sampling.temperature = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(engine.submit(bad, c.callback()).status, SubmitStatus::Invalid);
}

TEST(Engine, GenerationEndsAtTheContextLimit) {
  FakeModel model(/*context_length=*/6);
  Engine engine(model, small_options());
  Collector c;
  engine.submit(greedy({kBos, letter('a')}, 50), c.callback());
  EXPECT_EQ(c.text(), "bcde");  // 2 prompt + 4 generated = 6 positions
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Length);
}

TEST(Engine, ForwardFailureFinishesWithError) {
  FakeModel model;
  model.fail_forward();
  Engine engine(model, small_options());
  Collector c;
  engine.submit(greedy({kBos, letter('a')}, 5), c.callback());
  const GenerationEvent& done = c.wait();
  EXPECT_EQ(done.finish_reason, FinishReason::Error);
  EXPECT_NE(done.error.find("fake forward failure"), std::string::npos);
  wait_until_idle(engine);
}

TEST(Engine, ShutdownCancelsEverything) {
  FakeModel model;
  model.hold();
  auto engine = std::make_unique<Engine>(model, small_options());
  Collector a, b;
  engine->submit(greedy({kBos, letter('a')}, 50), a.callback());
  model.wait_for_forward_calls(1);
  engine->submit(greedy({kBos, letter('a')}, 50), b.callback());
  // Let forward calls through one at a time (never all 50 steps at once), so shutdown is what
  // ends both requests; shutdown() joins the engine thread, which needs permits to get there.
  std::atomic<bool> shut_down{false};
  std::thread releaser([&] {
    while (!shut_down) {
      model.grant(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  engine->shutdown();
  shut_down = true;
  releaser.join();
  EXPECT_EQ(a.wait().finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(b.wait().finish_reason, FinishReason::Cancelled);
  Collector late;
  EXPECT_EQ(engine->submit(greedy({kBos}, 2), late.callback()).status, SubmitStatus::ShuttingDown);
}

TEST(FirstComePolicy, DecodeTokensFirstThenPromptChunksWithinBudget) {
  FirstComePolicy policy(/*step_token_budget=*/8);
  std::vector<SequenceView> running = {
      {0, 50, 20, false},  // prefill: 20 tokens pending
      {1, 50, 1, true},    // decoding
      {2, 50, 5, false},   // prefill
      {3, 50, 1, true},
  };
  std::vector<StepSlice> slices = policy.plan_step(running);
  ASSERT_EQ(slices.size(), 3u);
  EXPECT_EQ(slices[0].index, 1);
  EXPECT_EQ(slices[0].n_tokens, 1);
  EXPECT_EQ(slices[1].index, 3);
  EXPECT_EQ(slices[2].index, 0);
  EXPECT_EQ(slices[2].n_tokens, 6);  // budget 8 - 2 decode tokens
}

TEST(FirstComePolicy, PrefillAlwaysProgressesAndAdmissionFillsFreeSlots) {
  FirstComePolicy policy(/*step_token_budget=*/1);
  std::vector<StepSlice> slices = policy.plan_step({{0, 50, 1, true}, {1, 50, 9, false}});
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].index, 1);
  EXPECT_EQ(slices[1].n_tokens, 1);
  EXPECT_EQ(policy.n_to_admit(5, 2), 2);
  EXPECT_EQ(policy.n_to_admit(1, 2), 1);
  EXPECT_TRUE(policy.plan_step({}).empty());
}

}  // namespace
}  // namespace k25
