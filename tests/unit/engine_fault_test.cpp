// The engine's exception barrier, driven by the debug fault hook (engine/step_fault.h): an
// exception or an allocation failure inside a step fails the request it belongs to, or the
// step's requests when it belongs to none; the engine keeps serving and no KV page leaks.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/step_fault.h"
#include "fake_model.h"
#include "parse_error.h"
#include "token_collector.h"

namespace k25 {
namespace {

using testing::error_of;
using testing::FakeModel;
using testing::kBos;
using testing::letter;

GenerationRequest greedy(char first, int max_tokens) {
  GenerationRequest r;
  r.prompt = {kBos, letter(first)};
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// The fake model's greedy output after {BOS, first}: the next letters.
std::vector<TokenId> letters_after(char first, int n) {
  std::vector<TokenId> out;
  for (int i = 1; i <= n; ++i) out.push_back(letter(static_cast<char>(first + i)));
  return out;
}

EngineOptions fault_options(const std::string& fault) {
  EngineOptions o;
  o.n_threads = 1;
  o.max_batch_size = 4;
  o.kv_page_tokens = 4;
  o.debug_fault = fault;
  return o;
}

void wait_until_idle(const Engine& engine) {
  while (engine.n_active() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Runs `first` alone into the first step (held there), then the others, so that all of them
// share the steps after it; returns once all have finished.
void run_sharing_steps(FakeModel& model, Engine& engine,
                       const std::vector<std::pair<char, TokenCollector*>>& requests,
                       int max_tokens) {
  model.hold();
  ASSERT_EQ(
      engine.submit(greedy(requests[0].first, max_tokens), requests[0].second->callback()).status,
      SubmitStatus::Accepted);
  model.wait_for_forward_calls(1);
  for (size_t i = 1; i < requests.size(); ++i) {
    ASSERT_EQ(
        engine.submit(greedy(requests[i].first, max_tokens), requests[i].second->callback()).status,
        SubmitStatus::Accepted);
  }
  model.release();
  for (const auto& [first, collector] : requests) collector->wait();
}

class EngineFault : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineFault, OneRequestsFailureInsideAStepFailsThatRequestOnly) {
  const std::string kind = GetParam();
  FakeModel model;
  // Request 2 fails while it is put into the batch after 3 tokens, beside requests 1 and 3.
  Engine engine(model, fault_options(kind + ":request=2:tokens=3"));
  TokenCollector a, b, c;
  run_sharing_steps(model, engine, {{'a', &a}, {'h', &b}, {'o', &c}}, 10);
  EXPECT_EQ(a.wait(), letters_after('a', 10));
  EXPECT_EQ(c.wait(), letters_after('o', 10));
  EXPECT_EQ(a.finished().finish_reason, FinishReason::Length);
  EXPECT_EQ(c.finished().finish_reason, FinishReason::Length);
  const GenerationEvent failed = b.finished();
  EXPECT_EQ(failed.finish_reason, FinishReason::Error);
  EXPECT_EQ(b.wait(), letters_after('h', 3));  // what it had before the failure
  const std::string what = kind == "bad_alloc" ? "std::bad_alloc" : "injected fault";
  EXPECT_NE(failed.error.find("internal error: " + what), std::string::npos) << failed.error;
  EXPECT_EQ(engine.stats().step_failures.load(), 0u);

  // No page leaked, and none of the failed request's KV was cached: 12 tokens of which 11 were
  // computed are 2 full pages of 4 for each request that finished, none for request 2.
  wait_until_idle(engine);
  EXPECT_EQ(engine.stats().prefix_cache_pages.load(), 4u);
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
  // The engine keeps serving.
  TokenCollector after;
  engine.submit(greedy('h', 5), after.callback());
  EXPECT_EQ(after.wait(), letters_after('h', 5));
}

TEST_P(EngineFault, AStepsFailureOfNoRequestFailsItsRunningRequestsAndFreesTheirPages) {
  const std::string kind = GetParam();
  FakeModel model;
  EngineOptions o = fault_options(kind + ":step=3");
  o.max_batch_size = 2;  // the third request waits for a slot: it is not in the failing step
  Engine engine(model, o);
  TokenCollector a, b, queued;
  // Step 1: a's prompt; step 2: a's first decode and b's prompt; step 3 fails.
  run_sharing_steps(model, engine, {{'a', &a}, {'h', &b}, {'o', &queued}}, 10);
  for (TokenCollector* failed : {&a, &b}) {
    const GenerationEvent e = failed->finished();
    EXPECT_EQ(e.finish_reason, FinishReason::Error);
    EXPECT_NE(e.error.find("internal error: "), std::string::npos) << e.error;
  }
  EXPECT_EQ(a.wait().size(), 2u);
  EXPECT_EQ(b.wait().size(), 1u);
  EXPECT_EQ(queued.wait(), letters_after('o', 10));
  EXPECT_EQ(queued.finished().finish_reason, FinishReason::Length);
  EXPECT_EQ(engine.stats().step_failures.load(), 1u);
  wait_until_idle(engine);
  EXPECT_EQ(engine.stats().prefix_cache_pages.load(), 2u);  // the queued request's only
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
  TokenCollector after;
  engine.submit(greedy('a', 10), after.callback());
  EXPECT_EQ(after.wait(), letters_after('a', 10));
}

INSTANTIATE_TEST_SUITE_P(Kinds, EngineFault, ::testing::Values("runtime_error", "bad_alloc"));

TEST(EngineFaultBarrier, AConsumerThatCannotTakeItsLastEventDoesNotStopTheEngine) {
  FakeModel model;
  model.hold();
  Engine engine(model, fault_options(""));
  bool got_finished = false;
  const SubmitResult throwing =
      engine.submit(greedy('a', 50), [&got_finished](const GenerationEvent& e) {
        if (e.kind != GenerationEvent::Kind::Finished) return;
        got_finished = true;
        throw std::bad_alloc();  // e.g. the server's queue for this client out of memory
      });
  model.wait_for_forward_calls(1);
  engine.cancel(throwing.id);  // the cancellation's Finished event throws on the engine thread
  model.release();
  wait_until_idle(engine);
  EXPECT_TRUE(got_finished);
  TokenCollector after;
  engine.submit(greedy('h', 5), after.callback());
  EXPECT_EQ(after.wait(), letters_after('h', 5));
  wait_until_idle(engine);  // the stats are published after the Finished event
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
}

TEST(StepFaultSpec, ParsesTheTwoFormsAndNamesWhatIsWrong) {
  const StepFault none = parse_step_fault("");
  EXPECT_EQ(none.kind, StepFault::Kind::kNone);
  const StepFault step = parse_step_fault("bad_alloc:step=7");
  EXPECT_EQ(step.kind, StepFault::Kind::kBadAlloc);
  EXPECT_EQ(step.request, 0u);
  EXPECT_EQ(step.step, 7u);
  const StepFault request = parse_step_fault("runtime_error:request=12:tokens=0");
  EXPECT_EQ(request.kind, StepFault::Kind::kRuntimeError);
  EXPECT_EQ(request.request, 12u);
  EXPECT_EQ(request.tokens, 0);
  EXPECT_EQ(parse_step_fault("runtime_error:request=3:tokens=5").tokens, 5);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"oom:step=1", "the kind must be runtime_error or bad_alloc"},
      {"bad_alloc", "expected <kind>:step=<n> or <kind>:request=<id>:tokens=<n>"},
      {"bad_alloc:step=0", "expected step=<positive integer>, got 'step=0'"},
      {"bad_alloc:step=x", "got 'step=x'"},
      {"bad_alloc:request=2", "expected step=<positive integer>, got 'request=2'"},
      {"bad_alloc:request=2:tokens=", "expected tokens=<positive integer>"},
      {"bad_alloc:request=0:tokens=1", "expected request=<positive integer>"},
  };
  for (const auto& [spec, message] : bad) {
    const std::string error = error_of([&] { parse_step_fault(spec); });
    EXPECT_NE(error.find("debug_fault '" + spec + "': "), std::string::npos) << error;
    EXPECT_NE(error.find(message), std::string::npos) << spec << ": " << error;
  }
}

TEST(StepFaultSpec, EachFaultFiresOnceAndOnlyWhereItIsNamed) {
  StepFaultInjector at_step(parse_step_fault("runtime_error:step=2"));
  at_step.at_request(1, 0);  // not a request's fault
  at_step.at_step(1);
  EXPECT_THROW(at_step.at_step(2), std::runtime_error);
  at_step.at_step(2);  // fired already
  StepFaultInjector at_request(parse_step_fault("bad_alloc:request=4:tokens=1"));
  at_request.at_step(1);
  at_request.at_request(4, 0);
  at_request.at_request(3, 1);
  EXPECT_THROW(at_request.at_request(4, 1), std::bad_alloc);
  at_request.at_request(4, 1);
  StepFaultInjector off(parse_step_fault(""));
  off.at_step(1);
  off.at_request(1, 0);
}

}  // namespace
}  // namespace k25
