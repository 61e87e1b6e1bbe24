// Speculative decoding in the engine (engine/speculation.h) on the real stories260K models and on
// every other reference model: a request with speculation gets exactly the tokens it gets
// without, alone and beside others;
// rejected drafts are rolled back and no KV page leaks, also under KV memory pressure with the
// prefix cache on.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/engine.h"
#include "kv/page_pool.h"
#include "test_paths.h"
#include "token_collector.h"

namespace k25 {
namespace {

using Tokens = std::vector<TokenId>;

struct ReferenceCase {
  std::string model;
  Tokens prompt;
  int n_predict = 0;
};

// The greedy cases of ../shared/reference/greedy-stories260K.jsonl (6 prompts x 3 model files).
std::vector<ReferenceCase> reference_cases() {
  std::ifstream in(testing::shared_path("reference/greedy-stories260K.jsonl"));
  std::vector<ReferenceCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    cases.push_back({j.at("model"), j.at("prompt_ids").get<Tokens>(), j.at("n_predict")});
  }
  return cases;
}

GenerationRequest greedy(const Tokens& prompt, int max_tokens, SpeculativeMode mode) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.speculative = mode;
  return r;
}

void wait_until_idle(const Engine& engine) {
  while (engine.n_active() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Runs the requests at once on a fresh engine; their tokens and Finished events, in order.
struct Outcome {
  std::vector<Tokens> tokens;
  std::vector<GenerationEvent> finished;
};
Outcome run_together(Model& model, const EngineOptions& options,
                     const std::vector<GenerationRequest>& requests) {
  Engine engine(model, options);
  std::vector<TokenCollector> collectors(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(engine.submit(requests[i], collectors[i].callback()).status, SubmitStatus::Accepted);
  }
  Outcome out;
  for (auto& c : collectors) {
    out.tokens.push_back(c.wait());
    out.finished.push_back(c.finished());
  }
  wait_until_idle(engine);
  // No page leaked: what is still in use is the prefix cache's.
  EXPECT_EQ(engine.stats().kv_pages_used.load(), engine.stats().prefix_cache_pages.load());
  return out;
}

Tokens run_alone(Model& model, const EngineOptions& options, const GenerationRequest& request,
                 GenerationEvent* finished = nullptr) {
  Outcome out = run_together(model, options, {request});
  if (finished) *finished = out.finished[0];
  return out.tokens[0];
}

EngineOptions small_options() {
  EngineOptions o;
  o.n_threads = 2;
  o.kv_page_tokens = 4;  // drafts cross page boundaries often
  return o;
}

std::unique_ptr<Model> load(const std::string& file) {
  return Model::load(testing::shared_path("models/" + file));
}

// Each kind of drafter: prompt lookup and self-speculation (the engine's draft plan).
class EngineSpeculationModes : public ::testing::TestWithParam<SpeculativeMode> {};

TEST_P(EngineSpeculationModes, GreedyTokensEqualTheTokensWithoutSpeculationOnEveryReferenceCase) {
  K25_REQUIRE_SHARED();
  const std::vector<ReferenceCase> cases = reference_cases();
  ASSERT_EQ(cases.size(), 18u);
  int drafted = 0, accepted = 0;
  for (const std::string file :
       {"stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf"}) {
    auto model = load(file);
    std::vector<GenerationRequest> off, ngram;
    for (const ReferenceCase& c : cases) {
      if (c.model != file) continue;
      off.push_back(greedy(c.prompt, c.n_predict, SpeculativeMode::kOff));
      ngram.push_back(greedy(c.prompt, c.n_predict, GetParam()));
    }
    ASSERT_EQ(off.size(), 6u);
    std::vector<Tokens> expected;
    for (size_t i = 0; i < off.size(); ++i) {
      expected.push_back(run_alone(*model, small_options(), off[i]));
      GenerationEvent finished;
      EXPECT_EQ(run_alone(*model, small_options(), ngram[i], &finished), expected[i])
          << file << " case " << i;
      drafted += finished.drafted_tokens;
      accepted += finished.accepted_tokens;
    }
    // All 6 at once, speculating (max_batch 8) and with the default step-aside threshold (4).
    for (int max_batch : {8, 4}) {
      EngineOptions o = small_options();
      o.speculation.max_batch = max_batch;
      const Outcome together = run_together(*model, o, ngram);
      int together_drafted = 0;
      for (size_t i = 0; i < off.size(); ++i) {
        EXPECT_EQ(together.tokens[i], expected[i]) << file << " case " << i << " of 6 at once";
        together_drafted += together.finished[i].drafted_tokens;
      }
      if (max_batch == 8) {
        EXPECT_GT(together_drafted, 0) << file;
      }
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);  // some drafts were right (the stories repeat themselves; the draft
                           // plan is most of the model)
}

// The greedy cases of every other file of ../shared/reference/ (qwen2-tiny and the random-weight
// models of every architecture, RoPE scaling and quant type): file name -> its cases.
std::map<std::string, std::vector<ReferenceCase>> other_reference_cases() {
  std::map<std::string, std::vector<ReferenceCase>> files;
  for (const auto& entry : std::filesystem::directory_iterator(testing::shared_path("reference"))) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("greedy-") || !name.ends_with(".jsonl") ||
        name == "greedy-stories260K.jsonl") {
      continue;
    }
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line);
      files[name].push_back({j.at("model"), j.at("prompt_ids").get<Tokens>(), j.at("n_predict")});
    }
  }
  return files;
}

// Random weights repeat themselves, so drafts are made and often kept; every case, alone and all
// of a file's cases at once (speculating: max_batch 8), gets the tokens it gets without.
TEST_P(EngineSpeculationModes, EveryOtherReferenceModelGivesTheTokensItGivesWithout) {
  K25_REQUIRE_SHARED();
  const auto files = other_reference_cases();
  ASSERT_GE(files.size(), 20u);
  int drafted = 0, accepted = 0;
  for (const auto& [name, cases] : files) {
    ASSERT_FALSE(cases.empty()) << name;
    auto model = load(cases[0].model);
    std::vector<GenerationRequest> speculating;
    std::vector<Tokens> expected;
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_EQ(cases[i].model, cases[0].model) << name;
      expected.push_back(
          run_alone(*model, small_options(),
                    greedy(cases[i].prompt, cases[i].n_predict, SpeculativeMode::kOff)));
      speculating.push_back(greedy(cases[i].prompt, cases[i].n_predict, GetParam()));
      GenerationEvent finished;
      EXPECT_EQ(run_alone(*model, small_options(), speculating.back(), &finished), expected[i])
          << name << " case " << i;
      drafted += finished.drafted_tokens;
      accepted += finished.accepted_tokens;
    }
    EngineOptions o = small_options();
    o.speculation.max_batch = 8;
    const Outcome together = run_together(*model, o, speculating);
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(together.tokens[i], expected[i]) << name << " case " << i << " with the others";
    }
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
}

// Drafts from a known continuation: right ones (the next tokens) or wrong ones (each off by one).
class KnownContinuationDrafter final : public Drafter {
 public:
  KnownContinuationDrafter(Tokens text, bool right, int n_vocab)
      : text_(std::move(text)), right_(right), n_vocab_(n_vocab) {}
  Tokens draft(const Tokens& text, int k) const override {
    Tokens out;
    for (size_t i = text.size(); i < text_.size() && out.size() < static_cast<size_t>(k); ++i) {
      out.push_back(right_ ? text_[i] : (text_[i] + 1) % n_vocab_);
    }
    return out;
  }

 private:
  Tokens text_;
  bool right_;
  int n_vocab_;
};

TEST(EngineSpeculation, RejectedAndAcceptedDraftsLeaveTheTokensAndTheKvPagesAsWithout) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const Tokens prompt = model->tokenizer().encode("Once upon a time, a little bird", true, false);
  const int n = 50;
  Tokens text = prompt;
  const Tokens expected =
      run_alone(*model, small_options(), greedy(prompt, n, SpeculativeMode::kOff));
  text.insert(text.end(), expected.begin(), expected.end());
  for (bool right : {false, true}) {
    EngineOptions o = small_options();
    o.speculation.drafter =
        std::make_shared<KnownContinuationDrafter>(text, right, model->config().n_vocab);
    Engine engine(*model, o);
    TokenCollector t;
    ASSERT_EQ(engine.submit(greedy(prompt, n, SpeculativeMode::kNgram), t.callback()).status,
              SubmitStatus::Accepted);
    EXPECT_EQ(t.wait(), expected) << (right ? "right" : "wrong") << " drafts";
    const GenerationEvent finished = t.finished();
    EXPECT_EQ(finished.completion_tokens, n);
    EXPECT_GT(finished.drafted_tokens, 0);
    if (right) {
      EXPECT_EQ(finished.accepted_tokens, finished.drafted_tokens);
      // The prompt's forward, then steps of k+1 tokens with k growing from 4 to 8.
      EXPECT_LT(engine.stats().forward_calls.load(), 12u);
    } else {
      EXPECT_EQ(finished.accepted_tokens, 0);
      // k shrinks from 4 to 1 while the pauses after failed drafts double (1, 2, 4, 8, 16):
      // drafts of 4, 3, 2, 1, 1, 1 in the 49 decode steps (1 + 2 + 4 + 8 + 16 paused).
      EXPECT_EQ(finished.drafted_tokens, 4 + 3 + 2 + 1 + 1 + 1);
      EXPECT_EQ(engine.stats().forward_calls.load(), static_cast<uint64_t>(n));
    }
    EXPECT_EQ(engine.stats().spec_drafted_tokens.load(),
              static_cast<uint64_t>(finished.drafted_tokens));
    EXPECT_EQ(engine.stats().spec_accepted_tokens.load(),
              static_cast<uint64_t>(finished.accepted_tokens));
    wait_until_idle(engine);
    // Prompt and output, less the last token, are the KV: its full pages stay cached, the
    // rest went back to the pool.
    const uint64_t full_pages = (prompt.size() + n - 1) / 4;
    EXPECT_EQ(engine.stats().prefix_cache_pages.load(), full_pages);
    EXPECT_EQ(engine.stats().kv_pages_used.load(), full_pages);
  }
}

TEST(EngineSpeculation, StopStringsAndMaxTokensEndTheOutputWhereTheyDoWithout) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const Tokens prompt = model->tokenizer().encode("Once upon a time", true, false);
  Tokens text = prompt;
  const Tokens long_output =
      run_alone(*model, small_options(), greedy(prompt, 64, SpeculativeMode::kOff));
  text.insert(text.end(), long_output.begin(), long_output.end());
  EngineOptions o = small_options();
  o.speculation.drafter =
      std::make_shared<KnownContinuationDrafter>(text, true, model->config().n_vocab);
  for (int max_tokens : {1, 2, 7, 13}) {
    GenerationEvent finished;
    EXPECT_EQ(run_alone(*model, o, greedy(prompt, max_tokens, SpeculativeMode::kNgram), &finished),
              Tokens(long_output.begin(), long_output.begin() + max_tokens));
    EXPECT_EQ(finished.finish_reason, FinishReason::Length);
  }
  GenerationRequest off = greedy(prompt, 64, SpeculativeMode::kOff);
  off.stop = {"named"};
  GenerationEvent expected;
  const Tokens expected_tokens = run_alone(*model, small_options(), off, &expected);
  ASSERT_EQ(expected.finish_reason, FinishReason::Stop);
  ASSERT_EQ(expected.matched_stop, "named");
  GenerationRequest ngram = off;
  ngram.speculative = SpeculativeMode::kNgram;
  GenerationEvent finished;
  EXPECT_EQ(run_alone(*model, o, ngram, &finished), expected_tokens);
  EXPECT_EQ(finished.matched_stop, "named");
  EXPECT_EQ(finished.completion_tokens, expected.completion_tokens);
  EXPECT_GT(finished.accepted_tokens, 0);
}

TEST_P(EngineSpeculationModes, SeededSampledRequestsGetTheTokensTheyGetWithout) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const Tokens prompt = model->tokenizer().encode("Lily and Ben", true, false);
  for (uint64_t seed : {1u, 2u, 3u}) {
    GenerationRequest off = greedy(prompt, 48, SpeculativeMode::kOff);
    off.sampling.temperature = 0.8f;
    off.sampling.seed = seed;
    GenerationRequest ngram = off;
    ngram.speculative = GetParam();
    GenerationEvent finished;
    EXPECT_EQ(run_alone(*model, small_options(), ngram, &finished),
              run_alone(*model, small_options(), off))
        << "seed " << seed;
    EXPECT_GT(finished.drafted_tokens, 0);
  }
}

// The upper tail of the chi-square distribution with `df` degrees of freedom at `x`: the
// regularised incomplete gamma Q(df / 2, x / 2), by its series below a + 1 and its continued
// fraction above (Lentz's method).
double chi_square_p(double x, int df) {
  const double a = df / 2.0, z = x / 2.0;
  if (z <= 0) return 1;
  const double log_front = -z + a * std::log(z) - std::lgamma(a);
  if (z < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 1000 && term > sum * 1e-16; ++n) {
      term *= z / (a + n);
      sum += term;
    }
    return 1 - sum * std::exp(log_front);
  }
  constexpr double kTiny = 1e-300;
  double b = z + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::abs(d) < kTiny ? kTiny : d;
    c = b + an / c;
    c = std::abs(c) < kTiny ? kTiny : c;
    d = 1 / d;
    h *= d * c;
    if (std::abs(d * c - 1) < 1e-16) break;
  }
  return std::exp(log_front) * h;
}

// Pearson's test that two samples of tokens come from one distribution: the p-value, with
// tokens seen fewer than 10 times in both samples together pooled into one category.
double same_distribution_p(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  std::map<TokenId, std::array<double, 2>> counts;
  for (TokenId t : a) counts[t][0] += 1;
  for (TokenId t : b) counts[t][1] += 1;
  std::vector<std::array<double, 2>> rows;
  std::array<double, 2> rare{0, 0};
  for (const auto& [token, c] : counts) {
    if (c[0] + c[1] < 10) {
      rare[0] += c[0];
      rare[1] += c[1];
    } else {
      rows.push_back(c);
    }
  }
  if (rare[0] + rare[1] > 0) rows.push_back(rare);
  const double n_a = static_cast<double>(a.size()), n_b = static_cast<double>(b.size());
  double x = 0;
  for (const auto& row : rows) {
    const double total = row[0] + row[1];
    const double e_a = total * n_a / (n_a + n_b), e_b = total * n_b / (n_a + n_b);
    x += (row[0] - e_a) * (row[0] - e_a) / e_a + (row[1] - e_b) * (row[1] - e_b) / e_b;
  }
  return chi_square_p(x, static_cast<int>(rows.size()) - 1);
}

TEST(ChiSquare, PValuesMatchTheTables) {
  EXPECT_NEAR(chi_square_p(3.841, 1), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p(5.991, 2), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p(18.307, 10), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p(29.588, 10), 0.001, 1e-5);
  EXPECT_NEAR(chi_square_p(124.342, 100), 0.05, 1e-4);
}

// The token at a fixed position of `n` sampled requests (seeds first_seed, first_seed + 1, ...),
// four at a time (at most speculative_max_batch decode, so that speculation does not step
// aside); the drafted and accepted token counts.
struct Sample {
  std::vector<TokenId> tokens;
  int drafted = 0, accepted = 0;
};
Sample sample_position(Model& model, GenerationRequest request, int position, int n,
                       uint64_t first_seed) {
  EngineOptions options = small_options();
  options.batch_timeout_ms = 0;  // four arrivals at a time: no need to wait for more
  Engine engine(model, options);
  Sample out;
  request.max_tokens = position + 1;
  for (int i = 0; i < n; i += 4) {
    std::vector<TokenCollector> collectors(static_cast<size_t>(std::min(4, n - i)));
    for (size_t j = 0; j < collectors.size(); ++j) {
      request.sampling.seed = first_seed + static_cast<uint64_t>(i) + j;
      EXPECT_EQ(engine.submit(request, collectors[j].callback()).status, SubmitStatus::Accepted);
    }
    for (TokenCollector& c : collectors) {
      const Tokens tokens = c.wait();
      out.tokens.push_back(tokens.at(static_cast<size_t>(position)));
      out.drafted += c.finished().drafted_tokens;
      out.accepted += c.finished().accepted_tokens;
    }
  }
  return out;
}

// Sampled requests speculate (the accept rule is "sample, then compare with the draft"), so the
// token distribution must be the model's: 1500 samples of the 10th token with n-gram drafts and
// 1500 without, with different seeds, are one distribution by Pearson's test (p > 0.001), while
// the same test tells temperature 0.8 from 1.0 apart (p < 1e-6): it has the power to see a
// difference. Deterministic: fixed seeds, and the forward pass is bitwise reproducible.
TEST(EngineSpeculation, SampledTokensWithDraftsHaveTheModelsDistribution) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const Tokens prompt = model->tokenizer().encode(
      "Lily and Ben went to the park. Lily and Ben went to the park. Lily and Ben", true, false);
  GenerationRequest request = greedy(prompt, 10, SpeculativeMode::kOff);
  request.sampling.temperature = 1.0f;
  request.sampling.top_k = 0;
  request.sampling.top_p = 1.0f;
  request.sampling.min_p = 0;
  constexpr int kPosition = 9, kSamples = 1500;
  const Sample off = sample_position(*model, request, kPosition, kSamples, 1);
  GenerationRequest ngram = request;
  ngram.speculative = SpeculativeMode::kNgram;
  const Sample drafted = sample_position(*model, ngram, kPosition, kSamples, 100'001);
  EXPECT_GT(drafted.drafted, kSamples);  // drafts were made and verified, often
  EXPECT_GT(drafted.accepted, kSamples / 4);
  const double p = same_distribution_p(off.tokens, drafted.tokens);
  EXPECT_GT(p, 0.001) << "the drafts changed the distribution";

  GenerationRequest cooler = request;
  cooler.sampling.temperature = 0.8f;
  const Sample control = sample_position(*model, cooler, kPosition, kSamples, 200'001);
  const double p_control = same_distribution_p(off.tokens, control.tokens);
  EXPECT_LT(p_control, 1e-6) << "the test has no power";
  std::printf("drafted %d, accepted %d; p (ngram vs off) %.3g, p (T 0.8 vs 1.0) %.3g\n",
              drafted.drafted, drafted.accepted, p, p_control);
}

TEST_P(EngineSpeculationModes, UnderKvPressureWithThePrefixCacheNoPageLeaksAndTokensAreUnchanged) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const ModelConfig& c = model->config();
  const std::string story = "Once upon a time, there was a little girl named Lily. She";
  std::vector<GenerationRequest> off;
  for (const std::string tail : {" loved", " saw", " had", " went", " wanted", " played"}) {
    off.push_back(
        greedy(model->tokenizer().encode(story + tail, true, false), 60, SpeculativeMode::kOff));
  }
  EngineOptions o = small_options();
  o.speculation.max_batch = 8;
  // 40 pages of 4 positions for 6 requests of about 80 positions each: they preempt and drop
  // each other's KV, and share the story's cached pages.
  o.kv_budget_bytes =
      PagePool::page_bytes_for({4, c.n_layers, c.n_kv_heads * c.head_dim, KvDtype::kF32}) * 40;
  std::vector<Tokens> expected;
  for (const GenerationRequest& r : off) expected.push_back(run_alone(*model, o, r));
  std::vector<GenerationRequest> ngram = off;
  for (GenerationRequest& r : ngram) r.speculative = GetParam();
  const Outcome together = run_together(*model, o, ngram);  // checks the page counters
  int drafted = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(together.tokens[i], expected[i]) << "request " << i;
    drafted += together.finished[i].drafted_tokens;
  }
  EXPECT_GT(drafted, 0);
}

// Self-speculation with the request's own pruned plan: the plan drafts, the full model answers.
TEST(EngineSpeculation, SelfSpeculationFromTheRequestsPlanAnswersWithTheFullModel) {
  K25_REQUIRE_SHARED();
  auto model = load("stories260K.gguf");
  const ModelConfig& c = model->config();
  const Tokens prompt = model->tokenizer().encode("Once upon a time, there was", true, false);
  auto plan = std::make_shared<ComputePlan>(ComputePlan::full(c.n_layers, c.n_heads));
  plan->set_ffn(2, false);  // agrees with the full model on most next tokens of a story
  GenerationRequest full = greedy(prompt, 40, SpeculativeMode::kOff);
  GenerationRequest pruned = full;
  pruned.plan = plan;
  GenerationRequest self = pruned;
  self.speculative = SpeculativeMode::kSelf;
  const Tokens expected = run_alone(*model, small_options(), full);
  ASSERT_NE(run_alone(*model, small_options(), pruned), expected);  // the plan alone differs
  Engine engine(*model, small_options());
  TokenCollector t;
  ASSERT_EQ(engine.submit(self, t.callback()).status, SubmitStatus::Accepted);
  EXPECT_EQ(t.wait(), expected);
  EXPECT_GT(t.finished().drafted_tokens, 0);
  EXPECT_GT(t.finished().accepted_tokens, 0);
  EXPECT_EQ(t.finished().final_plan, nullptr);  // it ran the whole model
  EXPECT_GT(engine.stats().spec_draft_forward_calls.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Drafters, EngineSpeculationModes,
                         ::testing::Values(SpeculativeMode::kNgram, SpeculativeMode::kSelf),
                         [](const ::testing::TestParamInfo<SpeculativeMode>& info) {
                           return std::string(speculative_mode_name(info.param));
                         });

}  // namespace
}  // namespace k25
