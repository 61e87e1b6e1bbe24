// Prefix reuse on the real model (R-KV4): a request whose prompt starts like an earlier one maps
// the cached KV pages and computes only the rest, and its greedy tokens are exactly those of an
// engine that computes everything.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "engine/engine.h"
#include "test_paths.h"

namespace k25 {
namespace {

struct Result {
  std::vector<TokenId> tokens;
  int cached_tokens = -1;
  FinishReason reason = FinishReason::Error;
};

class Collector {
 public:
  EventCallback callback() {
    return [this](const GenerationEvent& e) {
      std::lock_guard lock(mutex_);
      if (e.kind == GenerationEvent::Kind::Token) result_.tokens.push_back(e.token);
      if (e.kind == GenerationEvent::Kind::Finished) {
        result_.cached_tokens = e.cached_tokens;
        result_.reason = e.finish_reason;
        done_ = true;
        cv_.notify_all();
      }
    };
  }
  Result wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Result result_;
};

GenerationRequest greedy(std::vector<TokenId> prompt, int max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;  // fixed lengths, so the turns below have a known size
  return r;
}

Result run(Engine& engine, GenerationRequest request) {
  Collector c;
  EXPECT_EQ(engine.submit(std::move(request), c.callback()).status, SubmitStatus::Accepted);
  return c.wait();
}

std::vector<TokenId> concat_tokens(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

EngineOptions options(bool prefix_cache, size_t kv_budget_bytes = 0) {
  EngineOptions o;
  o.n_threads = 2;
  o.micro_task_tokens = 32;
  o.prefix_cache = prefix_cache;
  o.kv_budget_bytes = kv_budget_bytes;
  return o;
}

// Greedy tokens of `prompt` from an engine without a prefix cache.
std::vector<TokenId> reference(Model& model, const std::vector<TokenId>& prompt, int max_tokens) {
  Engine engine(model, options(false));
  Result r = run(engine, greedy(prompt, max_tokens));
  EXPECT_EQ(r.cached_tokens, 0);
  return r.tokens;
}

class EnginePrefix : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::shared_available()) return;
    model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
  }
  std::vector<TokenId> encode(const std::string& text, bool bos) {
    return model_->tokenizer().encode(text, bos, false);
  }
  std::unique_ptr<Model> model_;
};

const char* const kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, she saw a big red ball under a tree.";

TEST_F(EnginePrefix, SamePromptTwiceReusesFullPagesAndGivesTheSameTokens) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory, true);
  ASSERT_GT(prompt.size(), 40u);
  const std::vector<TokenId> expected = reference(*model_, prompt, 24);

  Engine engine(*model_, options(true));
  const Result first = run(engine, greedy(prompt, 24));
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ(first.tokens, expected);
  const Result second = run(engine, greedy(prompt, 24));
  // Whole pages, and never the last prompt token (its logits give the first output token).
  const int page = engine.kv_page_tokens();
  EXPECT_EQ(second.cached_tokens, (static_cast<int>(prompt.size()) - 1) / page * page);
  EXPECT_EQ(second.tokens, expected);
  EXPECT_EQ(engine.stats().cached_prompt_tokens.load(),
            static_cast<uint64_t>(second.cached_tokens));
  EXPECT_GT(engine.stats().prefix_cache_pages.load(), 0u);
}

TEST_F(EnginePrefix, ASharedPrefixWithADifferentEndingIsReused) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> base = encode(kStory, true);
  const std::vector<TokenId> a = concat_tokens(base, encode(" The ball was", false));
  const std::vector<TokenId> b = concat_tokens(base, encode(" Lily ran to", false));
  const std::vector<TokenId> expected_b = reference(*model_, b, 20);

  Engine engine(*model_, options(true));
  run(engine, greedy(a, 20));
  const Result rb = run(engine, greedy(b, 20));
  const int page = engine.kv_page_tokens();
  EXPECT_GE(rb.cached_tokens, static_cast<int>(base.size()) / page * page - page);
  EXPECT_GT(rb.cached_tokens, 0);
  EXPECT_EQ(rb.tokens, expected_b);
}

TEST_F(EnginePrefix, MultiTurnConversationReusesThePreviousTurn) {
  K25_REQUIRE_SHARED();
  Engine engine(*model_, options(true));
  std::vector<TokenId> conversation = encode(kStory, true);
  const int page = engine.kv_page_tokens();
  int previous_computed = 0;  // positions the previous turn computed
  for (int turn = 0; turn < 3; ++turn) {
    GenerationRequest request = greedy(conversation, 16);
    request.session_id = "conversation-1";
    const Result r = run(engine, request);
    EXPECT_EQ(r.tokens, reference(*model_, conversation, 16)) << "turn " << turn;
    if (turn > 0) {
      // The previous turn computed its prompt and all but its last output token.
      EXPECT_GE(r.cached_tokens, (previous_computed / page) * page) << "turn " << turn;
    } else {
      EXPECT_EQ(r.cached_tokens, 0);
    }
    conversation = concat_tokens(conversation, r.tokens);
    previous_computed = static_cast<int>(conversation.size()) - 1;
    conversation = concat_tokens(conversation, encode(" Then she said", false));
  }
  EXPECT_EQ(engine.stats().session_requests.load(), 3u);
  EXPECT_GT(engine.stats().session_cached_tokens.load(), 0u);
}

TEST_F(EnginePrefix, TinyBudgetEvictsCachedPagesAndStaysCorrect) {
  K25_REQUIRE_SHARED();
  const ModelConfig& c = model_->config();
  const size_t page_bytes = PagePool::page_bytes_for(
      {PagedKvCache::kDefaultPageTokens, c.n_layers, c.n_kv_heads * c.head_dim});
  // Eight pages (128 positions): one story and its output fill most of it.
  Engine engine(*model_, options(true, 8 * page_bytes));
  const std::vector<std::string> texts = {
      kStory,
      "The little dog ran to the park and saw a big red ball. He wanted to play with it, so he "
      "ran very fast.",
      "One day, a girl named Sue went to the beach with her mom. They played in the sand and "
      "built a big castle."};
  for (int round = 0; round < 2; ++round) {
    for (const std::string& text : texts) {
      const std::vector<TokenId> prompt = encode(text, true);
      const Result r = run(engine, greedy(prompt, 24));
      EXPECT_EQ(r.reason, FinishReason::Length);
      EXPECT_EQ(r.tokens, reference(*model_, prompt, 24)) << text;
    }
  }
  EXPECT_GT(engine.stats().prefix_cache_evictions.load(), 0u);
}

// Several running sequences map the same cached pages at once. (The budget leaves room for all:
// under memory pressure, dropped sequences recompute KV with prefill kernels whose rounding
// differs from the decode path, which can flip a greedy token with or without the cache.)
TEST_F(EnginePrefix, ConcurrentRequestsShareTheCachedPages) {
  K25_REQUIRE_SHARED();
  Engine engine(*model_, options(true));
  const std::vector<TokenId> base = encode(kStory, true);
  run(engine, greedy(base, 4));
  const std::vector<std::vector<TokenId>> prompts = {
      base, concat_tokens(base, encode(" Max", false)),
      concat_tokens(base, encode(" The end", false))};
  std::vector<Collector> collectors(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(engine.submit(greedy(prompts[i], 24), collectors[i].callback()).status,
              SubmitStatus::Accepted);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Result r = collectors[i].wait();
    EXPECT_GT(r.cached_tokens, 0) << "prompt " << i;
    EXPECT_EQ(r.tokens, reference(*model_, prompts[i], 24)) << "prompt " << i;
  }
}

// Sequences sharing pages under a pool too small for all of them: dropping one that shares its
// pages with another frees none of them, and the engine must not let the scheduler count them
// (else a planned task finds the pool exhausted and the request fails).
TEST_F(EnginePrefix, SharedPagesUnderMemoryPressureNeverFailARequest) {
  K25_REQUIRE_SHARED();
  const ModelConfig& c = model_->config();
  const size_t page_bytes = PagePool::page_bytes_for(
      {PagedKvCache::kDefaultPageTokens, c.n_layers, c.n_kv_heads * c.head_dim});
  EngineOptions o = options(true, 10 * page_bytes);
  o.micro_task_tokens = 8;
  o.step_token_budget = 16;
  Engine engine(*model_, o);
  const std::vector<TokenId> base = encode(kStory, true);
  run(engine, greedy(base, 2));
  const std::vector<std::string> endings = {" Max", " The end", " Lily", " Then", " Sue", " A"};
  // Lone runs first: two engines must not share one model at the same time (the forward pass
  // keeps its scratch buffers in the model).
  std::vector<std::vector<TokenId>> alone;
  for (const std::string& ending : endings) {
    alone.push_back(reference(*model_, concat_tokens(base, encode(ending, false)), 40));
  }
  std::vector<Collector> collectors(endings.size());
  for (size_t i = 0; i < endings.size(); ++i) {
    GenerationRequest r = greedy(concat_tokens(base, encode(endings[i], false)), 40);
    r.priority = i % 2 ? 10 : 100;  // gold ones preempt bronze ones, which lose their KV
    ASSERT_EQ(engine.submit(std::move(r), collectors[i].callback()).status, SubmitStatus::Accepted);
  }
  for (size_t i = 0; i < endings.size(); ++i) {
    const Result r = collectors[i].wait();
    EXPECT_EQ(r.reason, FinishReason::Length) << "request " << i;
    // Preempted sequences recompute their KV or map cached pages; the forward pass gives the
    // same bits whatever the batch, so the tokens are those of a lone run.
    EXPECT_EQ(r.tokens, alone[i]) << "request " << i;
  }
  EXPECT_GT(engine.stats().kv_drops.load(), 0u);
}

TEST_F(EnginePrefix, PrunedPlansNeitherPublishNorReuse) {
  K25_REQUIRE_SHARED();
  const ModelConfig& c = model_->config();
  auto plan = std::make_shared<ComputePlan>(ComputePlan::full(c.n_layers, c.n_heads));
  plan->ffn_on[c.n_layers - 1] = 0;
  const std::vector<TokenId> prompt = encode(kStory, true);
  Engine engine(*model_, options(true));
  GenerationRequest pruned = greedy(prompt, 8);
  pruned.plan = plan;
  EXPECT_EQ(run(engine, pruned).cached_tokens, 0);
  EXPECT_EQ(engine.stats().prefix_cache_pages.load(), 0u);  // nothing published
  run(engine, greedy(prompt, 8));                           // publishes full-model KV
  pruned = greedy(prompt, 8);
  pruned.plan = plan;
  EXPECT_EQ(run(engine, pruned).cached_tokens, 0);  // and a pruned request does not take it
}

}  // namespace
}  // namespace k25
