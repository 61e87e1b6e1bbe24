#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

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

TEST(Engine, IgnoreEosGeneratesPastTheEndOfGenerationToken) {
  FakeModel model;
  model.set_next(letter('c'), kEos);
  model.set_next(kEos, letter('x'));
  Engine engine(model, small_options());
  Collector c;
  GenerationRequest r = greedy({kBos, letter('a')}, 4);
  r.ignore_eos = true;
  engine.submit(r, c.callback());
  const std::vector<GenerationEvent> events = c.events();
  EXPECT_EQ(events[2].token, kEos);
  EXPECT_EQ(c.wait().completion_tokens, 4);
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Length);
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

// A request whose logits the sampler refuses (all NaN) fails alone; the engine goes on serving.
TEST(Engine, SamplerErrorFailsTheRequestNotTheEngine) {
  FakeModel model;
  model.set_nan_logits(true);
  Engine engine(model, small_options());
  Collector bad;
  engine.submit(greedy({kBos, letter('a')}, 5), bad.callback());
  const GenerationEvent& done = bad.wait();
  EXPECT_EQ(done.finish_reason, FinishReason::Error);
  EXPECT_NE(done.error.find("NaN"), std::string::npos) << done.error;
  model.set_nan_logits(false);
  Collector good;
  engine.submit(greedy({kBos, letter('a')}, 3), good.callback());
  EXPECT_EQ(good.wait().finish_reason, FinishReason::Length);
  EXPECT_EQ(good.text(), "bcd");
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

// Submits while the model is held so that all of them queue before the first step.
GenerationRequest with_priority(GenerationRequest r, int priority) {
  r.priority = priority;
  return r;
}

TEST(Engine, QueuedRequestsStartInPriorityOrder) {
  FakeModel model;
  model.hold();
  EngineOptions o = small_options();
  o.max_batch_size = 1;
  o.aging_per_second = 0;
  Engine engine(model, o);
  std::vector<std::pair<int, std::string>> order;  // priority, in order of finishing
  std::mutex m;
  Collector first;
  engine.submit(greedy({kBos, letter('a')}, 2), first.callback());
  model.wait_for_forward_calls(1);
  std::vector<std::unique_ptr<Collector>> collectors;
  for (int priority : {10, 50, 100, 10, 100}) {
    collectors.push_back(std::make_unique<Collector>());
    Collector* c = collectors.back().get();
    engine.submit(with_priority(greedy({kBos, letter('a')}, 1), priority),
                  [&, c, priority](const GenerationEvent& e) {
                    if (e.kind == GenerationEvent::Kind::Finished) {
                      std::lock_guard lock(m);
                      order.push_back({priority, ""});
                    }
                    c->callback()(e);
                  });
  }
  model.release();
  for (auto& c : collectors) c->wait();
  std::vector<int> priorities;
  for (auto& [p, unused] : order) priorities.push_back(p);
  EXPECT_EQ(priorities, (std::vector<int>{100, 100, 50, 10, 10}));
}

// Runs a greedy request after {BOS, a} alone (returning its text), then again as bronze; once
// the bronze has had 1 + `bronze_steps` forward calls, `gold_request` arrives as gold.
std::string run_bronze_then_gold(FakeModel& model, Engine& engine, int max_tokens, int bronze_steps,
                                 GenerationRequest gold_request, Collector& bronze,
                                 Collector& gold) {
  Collector alone;
  engine.submit(greedy({kBos, letter('a')}, max_tokens), alone.callback());
  const std::string uninterrupted = alone.text();
  model.hold();
  const int calls_before = model.forward_calls();
  engine.submit(with_priority(greedy({kBos, letter('a')}, max_tokens), 10), bronze.callback());
  model.grant(bronze_steps);  // the bronze prefills and decodes a few tokens
  model.wait_for_forward_calls(calls_before + bronze_steps + 1);
  engine.submit(with_priority(std::move(gold_request), 100), gold.callback());
  model.release();
  return uninterrupted;
}

TEST(Engine, GoldPreemptsBronzeAndBothGiveTheirUninterruptedTokens) {
  FakeModel model;
  EngineOptions o = small_options();
  o.max_batch_size = 1;
  Engine engine(model, o);
  Collector bronze, gold;
  const std::string uninterrupted =
      run_bronze_then_gold(model, engine, 20, 5, greedy({kBos, letter('p')}, 3), bronze, gold);
  EXPECT_EQ(gold.text(), "qrs");
  EXPECT_EQ(bronze.text(), uninterrupted);
  EXPECT_GE(engine.stats().preemptions.load(), 1u);
  // The gold finished first although the bronze was running when it arrived.
  EXPECT_LT(gold.wait().total_ms, bronze.wait().total_ms);
}

TEST(Engine, PreemptedSequenceRecomputesItsKvWhenMemoryRunsOut) {
  FakeModel model;
  EngineOptions o = small_options();
  o.max_batch_size = 2;
  o.kv_page_tokens = 4;
  // Fake model pages: 1 layer, kv_dim 1 -> 2 blocks of 64 bytes = 128 bytes; 5 pages = 20
  // positions, less than the two requests need together (16 + 14).
  o.kv_budget_bytes = 5 * 128;
  Engine engine(model, o);
  Collector bronze, gold;
  const std::string uninterrupted =
      run_bronze_then_gold(model, engine, 14, 9,
                           greedy({kBos, letter('c'), letter('d'), letter('e')}, 10), bronze, gold);
  EXPECT_EQ(gold.text(), "fghijklmno");
  EXPECT_EQ(bronze.text(), uninterrupted);
  EXPECT_GE(engine.stats().kv_drops.load(), 1u);
  EXPECT_GT(engine.stats().recomputed_tokens.load(), 0u);
  wait_until_idle(engine);
  // No sequence holds pages any more; what is left are full pages in the prefix cache, all idle.
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
  EXPECT_EQ(engine.stats().prefix_cache_idle_pages.load(),
            engine.stats().prefix_cache_pages.load());
}

TEST(Engine, WarnsAtStartWhenKvPagesAreNarrowerThanAKeyTile) {
  FakeModel model;
  EngineOptions o = small_options();
  for (const int page_tokens : {4, 16, 32}) {
    o.kv_page_tokens = page_tokens;
    ::testing::internal::CaptureStderr();
    { Engine engine(model, o); }
    const std::string err = ::testing::internal::GetCapturedStderr();
    const bool warned = err.find("warning: KV pages of " + std::to_string(page_tokens) +
                                 " positions") != std::string::npos;
    EXPECT_EQ(warned, page_tokens < 16) << page_tokens << ": " << err;
  }
}

TEST(Engine, LongPromptIsSplitSoAShortRequestsFirstTokenComesFirst) {
  FakeModel model(/*context_length=*/256);
  model.hold();
  EngineOptions o = small_options();
  o.step_token_budget = 16;
  o.micro_task_tokens = 8;
  Engine engine(model, o);
  std::vector<std::string> first_tokens;  // which request's first token came, in order
  std::mutex m;
  auto note_first = [&](std::string name, Collector& c) {
    auto seen = std::make_shared<bool>(false);
    return [&, name, seen, cb = c.callback()](const GenerationEvent& e) {
      if (e.kind == GenerationEvent::Kind::Token && !*seen) {
        *seen = true;
        std::lock_guard lock(m);
        first_tokens.push_back(name);
      }
      cb(e);
    };
  };
  Collector long_one, short_one;
  std::vector<TokenId> long_prompt(200, letter('a'));
  engine.submit(greedy(long_prompt, 2), note_first("long", long_one));
  model.wait_for_forward_calls(1);
  engine.submit(greedy({kBos, letter('x')}, 2), note_first("short", short_one));
  model.release();
  long_one.wait();
  short_one.wait();
  EXPECT_EQ(first_tokens, (std::vector<std::string>{"short", "long"}));
  EXPECT_GE(engine.stats().forward_calls.load(), 200u / 16);
}

TEST(Engine, RequestThatWaitsTooLongInTheQueueFails) {
  FakeModel model;
  model.hold();
  EngineOptions o = small_options();
  o.max_batch_size = 1;
  o.queue_timeout_ms = 50;
  Engine engine(model, o);
  Collector running, waiting;
  engine.submit(greedy({kBos, letter('a')}, 2), running.callback());
  model.wait_for_forward_calls(1);
  engine.submit(greedy({kBos, letter('a')}, 2), waiting.callback());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  model.release();
  const GenerationEvent& done = waiting.wait();
  EXPECT_EQ(done.finish_reason, FinishReason::Error);
  EXPECT_NE(done.error.find("queue"), std::string::npos);
  EXPECT_TRUE(done.queue_timeout);  // the server answers 503 + Retry-After
  EXPECT_EQ(running.wait().finish_reason, FinishReason::Length);
  EXPECT_EQ(engine.stats().queue_timeouts.load(), 1u);
}

TEST(Engine, PromptLargerThanTheKvBudgetIsRejected) {
  FakeModel model;
  EngineOptions o = small_options();
  o.kv_page_tokens = 4;
  o.kv_budget_bytes = 2 * 128;  // 8 positions
  Engine engine(model, o);
  Collector c;
  SubmitResult r = engine.submit(greedy(std::vector<TokenId>(10, letter('a')), 2), c.callback());
  EXPECT_EQ(r.status, SubmitStatus::Invalid);
  EXPECT_NE(r.message.find("KV budget"), std::string::npos);
}

TEST(Engine, GenerationStopsWithLengthWhenTheKvBudgetIsFull) {
  FakeModel model;
  EngineOptions o = small_options();
  o.kv_page_tokens = 4;
  o.kv_budget_bytes = 2 * 128;  // 8 positions
  Engine engine(model, o);
  Collector c;
  engine.submit(greedy({kBos, letter('a')}, 50), c.callback());
  // Positions 0..7 hold the prompt and b..g; h, sampled at position 7, has no page left.
  EXPECT_EQ(c.text(), "bcdefgh");
  EXPECT_EQ(c.wait().finish_reason, FinishReason::Length);
}

}  // namespace
}  // namespace k25
