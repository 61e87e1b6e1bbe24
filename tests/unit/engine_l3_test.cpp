// The L3 tier behind the prefix cache on the real model (R-KV2, R-KV4, R-KV5): pages evicted from
// L2 come back from disk, a restarted engine reuses the previous engine's prefixes, and a
// damaged or missing L3 file ends in recomputation with the same greedy tokens.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

struct Result {
  std::vector<TokenId> tokens;
  int cached_tokens = -1;
  int cached_tokens_disk = -1;  // of those, read back from L3
};

struct Pending {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Result out;
  Result wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
    return out;
  }
};

// Submits a greedy request; `pending` collects its tokens and says when it has finished.
RequestId start(Engine& engine, const std::vector<TokenId>& prompt, int max_tokens,
                Pending* pending) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  const SubmitResult submitted = engine.submit(r, [pending](const GenerationEvent& e) {
    std::lock_guard lock(pending->m);
    if (e.kind == GenerationEvent::Kind::Token) pending->out.tokens.push_back(e.token);
    if (e.kind == GenerationEvent::Kind::Finished) {
      pending->out.cached_tokens = e.cached_tokens;
      pending->done = true;
      pending->cv.notify_all();
    }
  });
  EXPECT_EQ(submitted.status, SubmitStatus::Accepted);
  return submitted.id;
}

Result run(Engine& engine, const std::vector<TokenId>& prompt, int max_tokens,
           const std::string& session_id = "") {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.session_id = session_id;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Result out;
  const SubmitResult submitted = engine.submit(r, [&](const GenerationEvent& e) {
    std::lock_guard lock(m);
    if (e.kind == GenerationEvent::Kind::Token) out.tokens.push_back(e.token);
    if (e.kind == GenerationEvent::Kind::Finished) {
      out.cached_tokens = e.cached_tokens;
      out.cached_tokens_disk = e.cached_tokens_disk;
      done = true;
      cv.notify_all();
    }
  });
  EXPECT_EQ(submitted.status, SubmitStatus::Accepted);
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return done; });
  return out;
}

class EngineL3 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::shared_available()) return;
    model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
    char pattern[] = "/tmp/k25-engine-l3-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  EngineOptions options(size_t kv_pages = 0) const {
    EngineOptions o;
    o.n_threads = 2;
    o.micro_task_tokens = 32;
    o.l3_path = dir_;
    o.l3_capacity_bytes = 16 << 20;
    o.l3_content_tag = 1;
    if (kv_pages) {
      const ModelConfig& c = model_->config();
      o.kv_budget_bytes = kv_pages * PagePool::page_bytes_for(
                                         {o.kv_page_tokens, c.n_layers, c.n_kv_heads * c.head_dim});
    }
    return o;
  }
  std::vector<TokenId> encode(const std::string& text) {
    return model_->tokenizer().encode(text, true, false);
  }
  // Greedy tokens from an engine without prefix cache or L3.
  std::vector<TokenId> reference(const std::vector<TokenId>& prompt, int max_tokens,
                                 KvDtype kv_dtype = KvDtype::kF32) {
    EngineOptions o;
    o.n_threads = 2;
    o.micro_task_tokens = 32;
    o.prefix_cache = false;
    o.kv_dtype = kv_dtype;
    Engine engine(*model_, o);
    return run(engine, prompt, max_tokens).tokens;
  }
  // Full pages of `prompt` a new request may reuse.
  static int reusable(const std::vector<TokenId>& prompt, int page_tokens) {
    return (static_cast<int>(prompt.size()) - 1) / page_tokens * page_tokens;
  }
  void expect_tiers_give_the_all_in_ram_tokens(KvDtype dtype);

  std::unique_ptr<Model> model_;
  std::string dir_;
};

// A test of the disk tier fails, never skips, when the tier could not be opened: the engine
// prints why ("warning: L3 KV tier off: ..."), e.g. io_uring forbidden by the sandbox.
#define K25_REQUIRE_L3(engine)                                                                   \
  do {                                                                                           \
    if (!(engine).l3_active())                                                                   \
      FAIL() << "L3 could not be opened (see the warning above; io_uring unavailable?): the L3 " \
                "tests need io_uring";                                                           \
  } while (0)

const char* const kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, she saw a big red ball under a tree.";

TEST_F(EngineL3, ARestartedEngineReusesThePrefixesOfThePreviousOne) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  const std::vector<TokenId> expected = reference(prompt, 20);
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    EXPECT_EQ(run(first, prompt, 20).tokens, expected);
  }  // the cached pages are written to L3 and the index saved
  Engine second(*model_, options());
  K25_REQUIRE_L3(second);
  const Result r = run(second, prompt, 20);
  EXPECT_EQ(r.cached_tokens, reusable(prompt, second.kv_page_tokens()));
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(second.stats().l3_restores.load(), static_cast<uint64_t>(r.cached_tokens) / 16);
  EXPECT_EQ(second.stats().l3_recomputations.load(), 0u);
}

TEST_F(EngineL3, PagesEvictedFromL2ComeBackFromL3) {
  K25_REQUIRE_SHARED();
  const std::vector<std::vector<TokenId>> prompts = {
      encode(kStory),
      encode("The little dog ran to the park and saw a big red ball. He wanted to play with it, "
             "so he ran very fast."),
      encode("One day, a girl named Sue went to the beach with her mom. They played in the sand "
             "and built a big castle.")};
  Engine engine(*model_, options(8));  // 8 pages: each request evicts the previous one's
  K25_REQUIRE_L3(engine);
  for (const auto& prompt : prompts) run(engine, prompt, 24);
  const Result again = run(engine, prompts[0], 24);
  EXPECT_GT(engine.stats().l3_restores.load(), 0u);
  EXPECT_EQ(again.cached_tokens, reusable(prompts[0], engine.kv_page_tokens()));
  EXPECT_EQ(again.tokens, reference(prompts[0], 24));
}

// Flips one byte in every 4 KiB slot of the data file: every page fails its checksum.
void damage_every_slot(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  const auto size = fs::file_size(path);
  for (uint64_t at = 100; at < size; at += 4096) {
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(at));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
}

TEST_F(EngineL3, ADamagedOrMissingL3FileEndsInRecomputationWithTheSameTokens) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  const std::vector<TokenId> expected = reference(prompt, 20);
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    run(first, prompt, 20);
  }
  damage_every_slot(dir_ + "/k25-l3.data");
  {
    Engine damaged(*model_, options());
    const Result r = run(damaged, prompt, 20);
    EXPECT_EQ(r.cached_tokens, 0);
    EXPECT_EQ(r.tokens, expected);
    // Every page of the chain was read (in parallel) and failed its checksum.
    EXPECT_EQ(damaged.stats().l3_recomputations.load(),
              static_cast<uint64_t>(reusable(prompt, damaged.kv_page_tokens()) / 16));
  }
  // The damaged engine recomputed and saved good pages again; now the data file goes.
  fs::remove(dir_ + "/k25-l3.data");
  Engine missing(*model_, options());
  K25_REQUIRE_L3(missing);
  const Result r = run(missing, prompt, 20);
  EXPECT_EQ(r.cached_tokens, 0);
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(missing.stats().l3_restores.load(), 0u);
}

TEST_F(EngineL3, ASessionContinuesAfterARestartLikeAnUninterruptedRun) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> turn1 = encode(kStory);
  std::vector<TokenId> turn2;
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    const Result r = run(first, turn1, 16);
    turn2 = turn1;
    turn2.insert(turn2.end(), r.tokens.begin(), r.tokens.end());
  }
  const int computed = static_cast<int>(turn2.size()) - 1;  // turn 1's KV: all but its last token
  const std::vector<TokenId> more = model_->tokenizer().encode(" Then she said", false, false);
  turn2.insert(turn2.end(), more.begin(), more.end());
  Engine second(*model_, options());
  K25_REQUIRE_L3(second);
  const Result r = run(second, turn2, 16);
  EXPECT_EQ(r.cached_tokens, computed / 16 * 16);
  EXPECT_EQ(r.tokens, reference(turn2, 16));
}

TEST_F(EngineL3, AFullDiskLosesThePagesButNotTheOutput) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  EngineOptions o = options();
  o.l3_capacity_bytes = 8192;  // two 4 KiB slots: no page (about 20 KiB) fits
  {
    Engine first(*model_, o);
    K25_REQUIRE_L3(first);
    run(first, prompt, 8);
  }
  Engine second(*model_, o);
  K25_REQUIRE_L3(second);
  const Result r = run(second, prompt, 8);
  EXPECT_EQ(r.cached_tokens, 0);
  EXPECT_EQ(r.tokens, reference(prompt, 8));
  EXPECT_EQ(second.stats().l3_pages_stored.load(), 0u);
}

TEST_F(EngineL3, AnotherContentTagNeverReadsThePages) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    run(first, prompt, 8);
  }
  EngineOptions o = options();
  o.l3_content_tag = 2;  // another model
  Engine other(*model_, o);
  EXPECT_EQ(run(other, prompt, 8).cached_tokens, 0);
  EXPECT_EQ(other.stats().l3_restores.load(), 0u);
}

// Attention over KV from all three tiers: the prompt's first pages restored from L3 into L2,
// the rest computed into L2 pages, the newest positions also in the L1 ring (a window of 5
// wraps many times), gives the tokens of a run with everything computed in RAM.
// With `dtype` rows: restored from L3 (written by a first engine), computed into L2, the newest
// also in a 5-position L1 ring.
void EngineL3::expect_tiers_give_the_all_in_ram_tokens(KvDtype dtype) {
  const std::vector<TokenId> prompt = encode(kStory);
  const std::vector<TokenId> expected = reference(prompt, 24, dtype);
  EngineOptions o = options();
  o.kv_dtype = dtype;
  {
    Engine first(*model_, o);
    K25_REQUIRE_L3(first);
    run(first, prompt, 24);
  }
  o.l1_window = 5;
  Engine engine(*model_, o);
  K25_REQUIRE_L3(engine);
  const Result r = run(engine, prompt, 24);
  EXPECT_EQ(r.cached_tokens, reusable(prompt, engine.kv_page_tokens()));
  EXPECT_GT(engine.stats().l3_restores.load(), 0u);
  EXPECT_GT(engine.stats().l1_hit_share.load(), 0.0);
  EXPECT_EQ(r.tokens, expected);
}

TEST_F(EngineL3, KvFromL1L2AndL3GivesTheTokensOfAnAllInRamRun) {
  K25_REQUIRE_SHARED();
  expect_tiers_give_the_all_in_ram_tokens(KvDtype::kF32);
}

// The same with F16 rows: L3 pages hold F16 and come back into F16 pages.
TEST_F(EngineL3, F16KvFromL1L2AndL3GivesTheTokensOfAnAllInRamF16Run) {
  K25_REQUIRE_SHARED();
  expect_tiers_give_the_all_in_ram_tokens(KvDtype::kF16);
}

// The KV element type is part of the store's content tag: after a restart with the other dtype
// the pages are never read (as the other type's bytes they would be garbage).
TEST_F(EngineL3, AnotherKvDtypeNeverReadsThePages) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  for (KvDtype written : {KvDtype::kF32, KvDtype::kF16}) {
    SCOPED_TRACE(to_string(written));
    fs::remove_all(dir_);
    fs::create_directory(dir_);
    EngineOptions o = options();
    o.kv_dtype = written;
    {
      Engine first(*model_, o);
      K25_REQUIRE_L3(first);
      run(first, prompt, 8);
    }
    o.kv_dtype = written == KvDtype::kF32 ? KvDtype::kF16 : KvDtype::kF32;
    Engine other(*model_, o);
    K25_REQUIRE_L3(other);
    EXPECT_EQ(run(other, prompt, 8).cached_tokens, 0);
    EXPECT_EQ(other.stats().l3_restores.load(), 0u);
  }
}

// Pages of 16 positions (f32 blocks of 2 KiB) are copied on their way out; pages of 32 (blocks
// of 4 KiB) are written from the L2 page itself, which goes back to the pool only when its write
// has completed, and are read straight into their new L2 page.
TEST_F(EngineL3, IdleCachedPagesMoveToL3AndComeBack) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> prompt = encode(kStory);
  const std::vector<TokenId> expected = reference(prompt, 12);
  const ModelConfig& c = model_->config();
  const size_t row_bytes = static_cast<size_t>(c.n_kv_heads) * c.head_dim * sizeof(float);
  for (const int page_tokens : {16, 32}) {
    SCOPED_TRACE(page_tokens);
    EngineOptions o = options();
    o.kv_page_tokens = page_tokens;
    o.l3_idle_seconds = 0.2;
    ASSERT_EQ(page_tokens * row_bytes % 4096 == 0, page_tokens == 32) << "the two layouts";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Engine engine(*model_, o);
    K25_REQUIRE_L3(engine);
    EXPECT_EQ(run(engine, prompt, 12).tokens, expected);
    // The idle engine checks about once a second; give it a few. Stats are published after each
    // step, so right after the request the page count may not be up to date yet; and a page is
    // found in L3 once its write has completed (collected at the next step), not before.
    const auto moved = [&] {
      const EngineStats& st = engine.stats();
      return st.l3_idle_spills.load() > 0 && st.prefix_cache_pages.load() == 0 &&
             st.l3_spills.load() >= st.l3_idle_spills.load() && st.kv_pages_used.load() == 0;
    };
    // Waits for the condition, with a deadline far past what a busy machine needs.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!moved() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(engine.stats().prefix_cache_pages.load(), 0u);  // out of L2
    EXPECT_EQ(engine.stats().kv_pages_used.load(), 0u);       // none held for a write
    EXPECT_GT(engine.stats().l3_idle_spills.load(), 0u);
    EXPECT_GT(engine.stats().kv_bytes_released.load(), 0u);  // and out of RAM
    const Result again = run(engine, prompt, 12);
    EXPECT_EQ(again.cached_tokens, reusable(prompt, engine.kv_page_tokens()));
    EXPECT_EQ(again.tokens, expected);
    EXPECT_GT(engine.stats().l3_restores.load(), 0u);
  }
}

// Three turns of one session 1.5 s apart, each resending the conversation; its pages go to L3
// 0.2 s after each turn (l3_idle_seconds). The fourth turn is predicted 1.5 s after the third:
// `prefetch` on, the pages are back in L2 before it; off, the turn reads them from L3 itself.
// Either way its tokens are those of a run without any cache.
Result fourth_turn_of_a_paced_session(Engine& engine, std::vector<TokenId> conversation,
                                      bool wait_for_prefetch, std::vector<TokenId>* prompt4) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int turn = 0; turn < 3; ++turn) {
    std::this_thread::sleep_until(t0 + turn * std::chrono::milliseconds(1500));
    const Result t = run(engine, conversation, 8, "chat-1");
    conversation.insert(conversation.end(), t.tokens.begin(), t.tokens.end());
  }
  // The prefetch is due 0.1 s before the predicted turn (half the idle time): wait until that
  // turn, and with the prefetch on until its pages have landed (a deadline far past what a busy
  // machine needs).
  std::this_thread::sleep_until(t0 + std::chrono::milliseconds(4500));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (wait_for_prefetch && engine.stats().l3_prefetched_pages.load() == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *prompt4 = conversation;
  return run(engine, conversation, 8, "chat-1");
}

TEST_F(EngineL3, AHotSessionsPagesAreReadBackBeforeItsNextTurn) {
  K25_REQUIRE_SHARED();
  for (const bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch on" : "prefetch off");
    EngineOptions o = options();
    o.l3_idle_seconds = 0.2;
    o.l3_session_prefetch = prefetch;
    Engine engine(*model_, o);
    K25_REQUIRE_L3(engine);
    std::vector<TokenId> prompt4;
    const Result fourth =
        fourth_turn_of_a_paced_session(engine, encode(kStory), prefetch, &prompt4);
    EXPECT_EQ(fourth.tokens, reference(prompt4, 8));
    EXPECT_EQ(fourth.cached_tokens, reusable(prompt4, engine.kv_page_tokens()));
    if (prefetch) {
      EXPECT_EQ(engine.stats().l3_prefetches.load(), 1u);
      EXPECT_GT(engine.stats().l3_prefetched_pages.load(), 0u);
      EXPECT_EQ(fourth.cached_tokens_disk, 0);  // all from L2: the prefetch brought them
    } else {
      EXPECT_EQ(engine.stats().l3_prefetches.load(), 0u);
      EXPECT_GT(fourth.cached_tokens_disk, 0);  // the turn read them from L3 itself
    }
  }
}

TEST_F(EngineL3, RestoresRunBesideOtherRequestsAndACancelledOneLeaksNoPage) {
  K25_REQUIRE_SHARED();
  const std::vector<TokenId> stored = encode(kStory);
  const std::vector<TokenId> fresh =
      encode("The little dog ran to the park and saw a big red ball. He wanted to play.");
  const std::vector<TokenId> expected_stored = reference(stored, 16);
  const std::vector<TokenId> expected_fresh = reference(fresh, 16);
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    run(first, stored, 16);
  }  // `stored` is in L3 now
  Engine engine(*model_, options());
  K25_REQUIRE_L3(engine);
  {
    Pending cancelled;
    engine.cancel(start(engine, stored, 16, &cancelled));  // likely while its reads are in flight
    cancelled.wait();
  }
  Pending a, b;
  start(engine, fresh, 16, &a);   // computes while the other's pages are read
  start(engine, stored, 16, &b);  // restored from L3 (the cancelled read's pages, or again)
  EXPECT_EQ(a.wait().tokens, expected_fresh);
  const Result rb = b.wait();
  EXPECT_EQ(rb.tokens, expected_stored);
  EXPECT_EQ(rb.cached_tokens, reusable(stored, engine.kv_page_tokens()));
  EXPECT_EQ(engine.stats().l3_recomputations.load(), 0u);
  // Nothing runs: every page in use is one the prefix cache holds (stats are published after
  // each step, so give the last one a moment).
  run(engine, fresh, 1);
  const auto only_cached = [&] {
    return engine.stats().kv_pages_used.load() == engine.stats().prefix_cache_pages.load();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!only_cached() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
}

TEST_F(EngineL3, AQueuedRequestWaitsForItsL3ReadInsteadOfComputingWhatL3Holds) {
  K25_REQUIRE_SHARED();
  // A shared opening (a system prompt) and two continuations: after a restart the opening comes
  // back into L2 with the first request, while the second request's own pages are only in L3.
  const std::string opening = kStory;
  const std::vector<TokenId> busy = encode(opening + " The ball was shiny and new.");
  const std::vector<TokenId> queued =
      encode(opening + " Lily ran to the tree and picked up the ball. It was soft and warm.");
  const std::vector<TokenId> expected = reference(queued, 8);
  {
    Engine first(*model_, options());
    K25_REQUIRE_L3(first);
    run(first, busy, 1);
    run(first, queued, 1);
  }
  EngineOptions o = options();
  o.max_batch_size = 1;  // one slot: while `busy` runs, `queued` cannot start a read
  Engine engine(*model_, o);
  K25_REQUIRE_L3(engine);
  Pending running, waiting;
  start(engine, busy, 300, &running);
  for (int i = 0; i < 2000; ++i) {  // until it generates: the opening is in L2 by then
    {
      std::lock_guard lock(running.m);
      if (!running.out.tokens.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  start(engine, queued, 8, &waiting);
  const Result r = waiting.wait();
  EXPECT_FALSE(running.wait().tokens.empty());
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(r.cached_tokens, reusable(queued, engine.kv_page_tokens()))
      << "the pages L3 held were read, not computed again";
  EXPECT_EQ(engine.stats().l3_recomputations.load(), 0u);
}

}  // namespace
}  // namespace k25
