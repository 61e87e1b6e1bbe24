// The forward pass against llama.cpp's reference outputs in ../shared/reference: greedy tokens,
// top logits and perplexity, with the comparison rules that folder's README gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model.h"
#include "model/perplexity.h"
#include "test_paths.h"

namespace k25 {
namespace {

using nlohmann::json;
using testing::shared_path;

// The comparison rules of ../shared/reference/README.md, by model file.
struct Tolerance {
  double near_tie_margin;  // tokens must agree up to a step whose top-2 margin is smaller
  double logit;            // |ours - reference| for the reference's top-8 logits
  // Quantised random models: the mean over steps 0-3 of the largest top-8 difference (0 = no
  // such bound).
  double mean_logit = 0;
  // False for the f32 stories260K and qwen2-tiny files: a divergence must itself be at a
  // near-tie. True where the README's rule is "equal up to the first step whose top-2 margin is
  // below near_tie_margin": the quantised stories260K files (whose margins move by up to 0.25
  // when the summation order changes, so over 400 tokens a step just above 0.1 can flip once
  // the sequence has passed a near-tie; the AVX2 kernel set does at step 283 of
  // long-context-400 q4_0) and the newer files.
  bool stop_at_first_near_tie = false;
};

Tolerance tolerance_for(const std::string& model_file) {
  const auto has = [&](const char* s) { return model_file.find(s) != std::string::npos; };
  if (has("random-llama-kq-") && !has("-f32")) return {0.5, 1.0, 0.25, true};
  if (has("random-qwen3moe")) return {0.05, 0.15, 0, true};
  if (has("random-llama") || has("random-gemma3") || has("random-qwen3")) {
    return {0.05, 0.1, 0, true};
  }
  if (has("q8_0") || has("q4_0")) return {0.1, 0.4, 0, true};
  return {0.03, 0.02};
}

std::vector<json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

TokenId argmax_lowest_id(const float* logits, int n) {
  return static_cast<TokenId>(std::max_element(logits, logits + n) - logits);
}

// Runs every case of a greedy reference file and checks it against the tolerance rules, with
// the KV cache's rows stored as kv_dtype.
void check_greedy_reference(const std::string& jsonl, KvDtype kv_dtype = KvDtype::kF32) {
  std::map<std::string, std::unique_ptr<Model>> models;
  ThreadPool pool(2);
  const std::vector<json> cases = read_jsonl(shared_path("reference/" + jsonl));
  ASSERT_FALSE(cases.empty());
  for (const json& c : cases) {
    const std::string file = c["model"];
    SCOPED_TRACE(c["id"].get<std::string>() + " / " + file);
    auto& model = models[file];
    if (!model) model = Model::load(shared_path("models/" + file));
    const Tolerance tol = tolerance_for(file);
    const int n_vocab = model->config().n_vocab;

    const std::vector<TokenId> prompt =
        model->tokenizer().encode(c["prompt"].get<std::string>(), true, false);
    ASSERT_EQ(prompt, c["prompt_ids"].get<std::vector<TokenId>>());

    auto kv = model->make_kv_cache(kv_dtype);
    std::vector<float> logits(n_vocab);
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.push_back({prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size()});
    }
    model->forward(batch, *kv, logits.data(), pool);

    const auto expected = c["generated_ids"].get<std::vector<TokenId>>();
    const auto margins = c["top2_margin"].get<std::vector<double>>();
    const json& top_logits = c["top_logits"];
    double worst_logit_diff = 0, sum_step_diff = 0;
    int compared = 0, logit_steps = 0;
    bool past_near_tie = false;  // a step with a margin below the rule's has been generated
    for (size_t step = 0; step < expected.size(); ++step) {
      if (step < top_logits.size()) {
        double step_diff = 0;
        for (const json& pair : top_logits[step]) {
          const double diff = std::abs(logits[pair[0].get<int>()] - pair[1].get<double>());
          step_diff = std::max(step_diff, diff);
          EXPECT_LE(diff, tol.logit) << "step " << step << " token " << pair[0];
        }
        worst_logit_diff = std::max(worst_logit_diff, step_diff);
        sum_step_diff += step_diff;
        ++logit_steps;
      }
      const bool near_tie = margins[step] < tol.near_tie_margin;
      const TokenId ours = argmax_lowest_id(logits.data(), n_vocab);
      if (ours != expected[step]) {
        // Only a near-tie may flip; after it the sequences legitimately differ.
        if (tol.stop_at_first_near_tie) {
          ASSERT_TRUE(past_near_tie || near_tie)
              << "divergence at step " << step << " (margin " << margins[step]
              << ") before any step with a margin below " << tol.near_tie_margin;
        } else {
          ASSERT_LT(margins[step], tol.near_tie_margin) << "divergence at step " << step;
        }
        break;
      }
      past_near_tie = past_near_tie || near_tie;
      ++compared;
      const int pos = static_cast<int>(prompt.size() + step);
      model->forward({{ours, pos, 0, true}}, *kv, logits.data(), pool);
    }
    if (tol.mean_logit > 0 && logit_steps > 0) {
      EXPECT_LT(sum_step_diff / logit_steps, tol.mean_logit)
          << "mean of the per-step largest top-8 logit differences over steps 0-3";
    }
    std::cout << "[ reference ] " << c["id"].get<std::string>() << " " << file << " kv "
              << to_string(kv_dtype) << ": " << compared << "/" << expected.size()
              << " tokens compared, worst top-8 logit diff " << worst_logit_diff << "\n";
  }
}

TEST(Reference, GreedyStories260KMatchesLlamaCpp) {
  K25_REQUIRE_SHARED();
  check_greedy_reference("greedy-stories260K.jsonl");
}

TEST(Reference, GreedyQwen2TinyMatchesLlamaCpp) {
  K25_REQUIRE_SHARED();
  check_greedy_reference("greedy-qwen2-tiny.jsonl");
}

// llama.cpp stores its KV cache as F16 by default: the same rules hold with F16 rows.
TEST(Reference, GreedyStories260KMatchesLlamaCppWithF16Kv) {
  K25_REQUIRE_SHARED();
  check_greedy_reference("greedy-stories260K.jsonl", KvDtype::kF16);
}

TEST(Reference, GreedyQwen2TinyMatchesLlamaCppWithF16Kv) {
  K25_REQUIRE_SHARED();
  check_greedy_reference("greedy-qwen2-tiny.jsonl", KvDtype::kF16);
}

// The reference files made with llama.cpp 80fb11ac (README "Greedy references for the
// random-weight test models"): every quant type and mixture, RoPE scaling, Qwen3, Qwen3-MoE,
// Gemma 3.
class ReferenceGreedy : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceGreedy, MatchesLlamaCpp) {
  K25_REQUIRE_SHARED();
  check_greedy_reference("greedy-" + GetParam() + ".jsonl", KvDtype::kF16);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, ReferenceGreedy,
                         ::testing::Values("random-llama-kq-f32", "random-llama-kq-q2_k",
                                           "random-llama-kq-q3_k_m", "random-llama-kq-q4_k_s",
                                           "random-llama-kq-q4_k_m", "random-llama-kq-q5_k_s",
                                           "random-llama-kq-q5_k_m", "random-llama-kq-q6_k",
                                           "random-llama-kq-q4_0", "random-llama-kq-q4_1",
                                           "random-llama-kq-q5_0", "random-llama-kq-q5_1",
                                           "random-llama-kq-iq4_nl", "random-llama-kq-iq4_xs",
                                           "random-llama3-rope", "random-llama-linear-rope",
                                           "random-qwen3", "random-qwen3moe", "random-gemma3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

std::vector<TokenId> read_reference_tokens() {
  std::ifstream in(shared_path("reference/stories-sample-tokens.txt"));
  std::vector<TokenId> ids;
  for (TokenId id; in >> id;) ids.push_back(id);
  return ids;
}

std::string read_corpus() {
  std::ifstream in(shared_path("data/stories-sample.txt"), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// `tolerance` is the margin reference/perplexity.md gives per weight type (absolute): what an
// F32 KV cache or exact F32 activations move llama.cpp's own figure by.
struct PerplexityCase {
  std::string model;
  int n_ctx;
  double expected;
  double tolerance;
};

class ReferencePerplexity : public ::testing::TestWithParam<PerplexityCase> {};

TEST_P(ReferencePerplexity, MatchesLlamaPerplexity) {
  K25_REQUIRE_SHARED();
  const PerplexityCase& p = GetParam();
  auto model = Model::load(shared_path("models/" + p.model));
  const std::vector<TokenId> tokens = model->tokenizer().encode(read_corpus(), true, false);
  ASSERT_EQ(tokens, read_reference_tokens());
  ThreadPool pool(2);
  const PerplexityResult r = compute_perplexity(*model, tokens, p.n_ctx, pool);
  EXPECT_EQ(r.n_chunks, static_cast<int>(8366 / p.n_ctx));
  EXPECT_EQ(r.n_scored, r.n_chunks * (p.n_ctx / 2 - 1));
  std::cout << "[ reference ] perplexity " << p.model << " c=" << p.n_ctx << ": " << r.ppl
            << " +/- " << r.error << " (llama.cpp " << p.expected << ")\n";
  EXPECT_NEAR(r.ppl, p.expected, p.tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Stories260K, ReferencePerplexity,
    ::testing::Values(PerplexityCase{"stories260K.gguf", 128, 4.231936, 0.002},
                      PerplexityCase{"stories260K.gguf", 256, 4.279294, 0.002},
                      PerplexityCase{"stories260K-q8_0.gguf", 128, 4.236499, 0.005},
                      PerplexityCase{"stories260K-q8_0.gguf", 256, 4.281993, 0.005},
                      PerplexityCase{"stories260K-q4_0.gguf", 128, 4.535500, 0.01},
                      PerplexityCase{"stories260K-q4_0.gguf", 256, 4.657768, 0.01}));

}  // namespace
}  // namespace k25
