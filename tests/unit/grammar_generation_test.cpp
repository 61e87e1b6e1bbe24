// Constrained decoding with real vocabularies and models: the mask agrees with a token-by-token
// check, greedy picks the argmax of the allowed tokens, and generation under a schema (sampled at
// temperature 1, many seeds) always gives JSON that validates, alone and batched in the engine.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <random>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "json_schema_check.h"
#include "model/generate.h"
#include "model/grammar_matcher.h"
#include "model/grammar_sampling.h"
#include "model/json_schema_grammar.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

using nlohmann::ordered_json;

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    "pet": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
      "kind": {"enum": ["cat", "dog"]}, "good": {"type": "boolean"}}, "required": ["kind", "good"],
      "additionalProperties": false}]}
  },
  "required": ["name", "age", "tags", "pet"],
  "additionalProperties": false
})";

std::shared_ptr<const GrammarVocabulary> vocabulary_of(const std::string& model_file) {
  const auto file = GgufFile::open(testing::shared_path("models/" + model_file));
  static std::map<std::string, std::shared_ptr<const GrammarVocabulary>> cache;
  auto& v = cache[model_file];
  if (!v) v = std::make_shared<const GrammarVocabulary>(*Tokenizer::from_gguf(*file));
  return v;
}

class RealVocabulary : public ::testing::TestWithParam<const char*> {};

TEST_P(RealVocabulary, MaskEqualsTokenByTokenCheck) {
  const auto vocabulary = vocabulary_of(GetParam());
  const auto grammar = compile_json_schema(ordered_json::parse(kPersonSchema));
  GrammarMatcher base(grammar, vocabulary, vocabulary->end_of_generation());
  for (const std::string prefix :
       {"", "{", "{\"name\": \"B", "{\"name\": \"Bo\", \"age\": 1", "{\"name\": \"\xC3",
        "{\"name\":\"x\",\"age\":0,\"tags\":[],\"pet\":null"}) {
    GrammarMatcher m = base;
    ASSERT_TRUE(m.accept_bytes(prefix)) << prefix;
    const std::vector<uint64_t> mask = m.allowed_tokens();
    int n_allowed = 0;
    for (TokenId t = 0; t < m.n_vocab(); ++t) {
      const bool in_mask = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
      ASSERT_EQ(in_mask, m.allows(t))
          << "prefix '" << prefix << "' token " << t << " '" << vocabulary->piece(t) << "'";
      n_allowed += in_mask;
    }
    EXPECT_GT(n_allowed, 0) << prefix;
  }
  // End of generation only where the grammar may end.
  GrammarMatcher m = base;
  for (TokenId eog : vocabulary->end_of_generation()) EXPECT_FALSE(m.allows(eog));
  ASSERT_TRUE(m.accept_bytes("{\"name\":\"x\",\"age\":0,\"tags\":[],\"pet\":null}"));
  EXPECT_TRUE(m.is_complete());
  for (TokenId eog : vocabulary->end_of_generation()) EXPECT_TRUE(m.allows(eog));
}

TEST_P(RealVocabulary, GreedyPicksTheArgmaxOfTheAllowedTokens) {
  const auto vocabulary = vocabulary_of(GetParam());
  const auto grammar = compile_json_schema(ordered_json::parse(kPersonSchema));
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy, vocabulary->n_vocab());
  GrammarMatcher m(grammar, vocabulary, vocabulary->end_of_generation());
  std::vector<TokenId> history{0};
  for (int step = 0; step < 40 && !m.is_complete(); ++step) {
    std::vector<float> logits(static_cast<size_t>(vocabulary->n_vocab()));
    for (float& l : logits) l = normal(rng);
    GrammarMatcher before = m;
    TokenId best = -1;
    for (TokenId t = 0; t < vocabulary->n_vocab(); ++t)
      if (before.allows(t) && (best < 0 || logits[t] > logits[best])) best = t;
    const TokenId got =
        sample_constrained(sampler, m, logits.data(), vocabulary->n_vocab(), history, 1000);
    ASSERT_EQ(got, best) << "step " << step;
    history.push_back(got);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealVocabulary,
                         ::testing::Values("stories260K.gguf", "random-qwen3.gguf"));

void expect_valid(const std::string& text, const ordered_json& schema, const std::string& what) {
  ordered_json value;
  ASSERT_NO_THROW(value = ordered_json::parse(text)) << what << ": " << text;
  EXPECT_EQ(testing::schema_violation(value, schema), "") << what << ": " << text;
}

TEST(ConstrainedGeneration, SampledOutputsAlwaysValidate) {
  const ordered_json schema = ordered_json::parse(kPersonSchema);
  const auto grammar = compile_json_schema(schema);
  ThreadPool pool(2);
  for (const char* file : {"stories260K.gguf", "random-llama-kq-f32.gguf"}) {
    auto model = Model::load(testing::shared_path(std::string("models/") + file));
    const auto prompt = model->tokenizer().encode("Once upon a time", true, false);
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      GenerateOptions options;
      options.n_predict = 400;
      options.sampling.temperature = 1.0f;
      options.sampling.top_k = 0;
      options.sampling.top_p = 1.0f;
      options.sampling.min_p = 0.0f;
      options.sampling.seed = seed;
      options.grammar = grammar;
      const GenerateResult r = generate(*model, pool, prompt, options);
      ASSERT_EQ(r.finish_reason, "stop") << file << " seed " << seed << ": " << r.text;
      expect_valid(r.text, schema, concat(file, " seed ", seed));
    }
  }
}

struct Collected {
  std::mutex mutex;
  std::condition_variable done_cv;
  std::vector<TokenId> tokens;
  std::string text;
  FinishReason reason = FinishReason::Error;
  bool done = false;
  EventCallback callback() {
    return [this](const GenerationEvent& e) {
      std::lock_guard lock(mutex);
      text += e.text;
      if (e.kind == GenerationEvent::Kind::Token) {
        tokens.push_back(e.token);
      } else {
        reason = e.finish_reason;
        done = true;
        done_cv.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
  }
};

TEST(ConstrainedGeneration, EngineOutputsValidateAndDoNotDependOnTheBatch) {
  const ordered_json schema = ordered_json::parse(kPersonSchema);
  const auto grammar = compile_json_schema(schema);
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const auto request = [&](uint64_t seed, bool constrained) {
    GenerationRequest r;
    r.prompt = model->tokenizer().encode("Lily and Tom", true, false);
    r.max_tokens = 400;
    r.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
    r.sampling.seed = seed;
    if (constrained) r.grammar = grammar;
    return r;
  };
  EngineOptions options;
  options.n_threads = 2;
  std::vector<std::vector<TokenId>> alone;
  {
    Engine engine(*model, options);
    for (uint64_t seed = 0; seed < 4; ++seed) {
      Collected c;
      engine.submit(request(seed, true), c.callback());
      c.wait();
      EXPECT_EQ(c.reason, FinishReason::Stop);
      expect_valid(c.text, schema, concat("seed ", seed));
      alone.push_back(c.tokens);
    }
  }
  Engine engine(*model, options);
  std::vector<Collected> together(8);
  for (uint64_t i = 0; i < 8; ++i) {
    // Constrained requests share steps with unconstrained ones.
    engine.submit(request(i / 2, i % 2 == 0), together[i].callback());
  }
  for (uint64_t i = 0; i < 8; i += 2) {
    together[i].wait();
    EXPECT_EQ(together[i].tokens, alone[i / 2]) << "seed " << i / 2;
  }
  for (uint64_t i = 1; i < 8; i += 2) together[i].wait();

  // max_tokens before the grammar completes: finish reason length.
  Collected cut;
  GenerationRequest short_request = request(0, true);
  short_request.max_tokens = 3;
  engine.submit(short_request, cut.callback());
  cut.wait();
  EXPECT_EQ(cut.reason, FinishReason::Length);
  EXPECT_EQ(cut.tokens.size(), 3u);
}

}  // namespace
}  // namespace k25
