// Properties of the forward pass that the engine relies on: batching a prompt, or mixing
// sequences in one batch, gives the same logits as running tokens one at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/attention_split.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "test_paths.h"

namespace k25 {
namespace {

using testing::shared_path;

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// The largest logit difference between one prefill call over `ids` and the same tokens fed one
// forward call at a time.
float prefill_vs_token_by_token(Model& model, const std::vector<TokenId>& ids, ThreadPool& pool) {
  const int n_vocab = model.config().n_vocab;
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i) batch.push_back({ids[i], static_cast<int>(i), 0, true});
  std::vector<float> batched(ids.size() * n_vocab);
  auto kv = model.make_kv_cache();
  model.forward(batch, *kv, batched.data(), pool);

  std::vector<float> single(ids.size() * n_vocab);
  auto kv2 = model.make_kv_cache();
  for (size_t i = 0; i < ids.size(); ++i) {
    model.forward({{ids[i], static_cast<int>(i), 0, true}}, *kv2, single.data() + i * n_vocab,
                  pool);
  }
  return max_abs_diff(batched, single);
}

TEST(Transformer, BatchedPrefillEqualsTokenByToken) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/stories260K.gguf"));
  ThreadPool pool(2);
  const std::vector<TokenId> ids =
      model->tokenizer().encode("Lily and Ben went to the park", true, false);
  EXPECT_LT(prefill_vs_token_by_token(*model, ids, pool), 1e-3);
}

TEST(Transformer, SequencesInOneBatchDoNotInterfere) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/stories260K-q8_0.gguf"));
  ThreadPool pool(2);
  const int n_vocab = model->config().n_vocab;
  const auto a = model->tokenizer().encode("Once upon a time", true, false);
  const auto b = model->tokenizer().encode("The cat sat on the big red mat", true, false);

  auto alone = [&](const std::vector<TokenId>& ids) {
    auto kv = model->make_kv_cache();
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i)
      batch.push_back({ids[i], static_cast<int>(i), 0, i + 1 == ids.size()});
    std::vector<float> logits(n_vocab);
    model->forward(batch, *kv, logits.data(), pool);
    return logits;
  };
  const std::vector<float> la = alone(a), lb = alone(b);

  auto kv = model->make_kv_cache();
  std::vector<BatchToken> mixed;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < b.size()) mixed.push_back({b[i], static_cast<int>(i), 5, i + 1 == b.size()});
    if (i < a.size()) mixed.push_back({a[i], static_cast<int>(i), 2, i + 1 == a.size()});
  }
  std::vector<float> both(2 * n_vocab);
  model->forward(mixed, *kv, both.data(), pool);
  // a finishes first, so its logits come first in batch order.
  EXPECT_LT(max_abs_diff(std::vector<float>(both.begin(), both.begin() + n_vocab), la), 1e-3);
  EXPECT_LT(max_abs_diff(std::vector<float>(both.begin() + n_vocab, both.end()), lb), 1e-3);
}

// Gemma 3's sliding-window layer (window 32) with prompts longer than the window and than one
// attention task: the window start must follow each token, whatever else shares its batch.
TEST(Transformer, SlidingWindowLogitsDoNotDependOnTheBatch) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/random-gemma3.gguf"));
  ThreadPool pool(2);
  std::string text;
  for (int i = 0; i < 12; ++i) text += "Lily and Ben went to the park. ";
  const std::vector<TokenId> ids = model->tokenizer().encode(text, true, false);
  ASSERT_GT(ids.size(), 80u);
  EXPECT_LT(prefill_vs_token_by_token(*model, ids, pool), 1e-3);
}

// Windows longer than one attention chunk (attention_split.h) are attended to in parts and
// merged: tokens on both sides of the chunk boundary give the same logits, bit for bit, whether
// they run in one batch (next to another sequence) or one at a time.
TEST(Transformer, AttentionOverSeveralChunksDoesNotDependOnTheBatch) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/random-llama3-rope.gguf"));
  ThreadPool pool(2);
  const int n_vocab = model->config().n_vocab;
  const int n_prefix = kAttentionChunk - 24, n_tail = 48;
  ASSERT_GE(model->config().context_length, n_prefix + n_tail);
  std::vector<TokenId> ids(n_prefix + n_tail);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>((i * 7919 + 3) % n_vocab);

  // Both caches hold the prefix; sequence 1 of the batched one holds a short other prompt.
  auto batched_kv = model->make_kv_cache(), single_kv = model->make_kv_cache();
  std::vector<BatchToken> prefix;
  for (int i = 0; i < n_prefix; ++i) prefix.push_back({ids[i], i, 0, false});
  std::vector<float> unused(n_vocab);
  prefix.back().want_logits = true;
  model->forward(prefix, *batched_kv, unused.data(), pool);
  model->forward(prefix, *single_kv, unused.data(), pool);

  std::vector<BatchToken> tail;
  for (int i = n_prefix; i < n_prefix + n_tail; ++i) tail.push_back({ids[i], i, 0, true});
  for (int i = 0; i < 5; ++i) tail.push_back({ids[i], i, 1, false});
  std::vector<float> together(static_cast<size_t>(n_tail) * n_vocab);
  model->forward(tail, *batched_kv, together.data(), pool);
  for (int i = 0; i < n_tail; ++i) {
    std::vector<float> alone(n_vocab);
    model->forward({{ids[n_prefix + i], n_prefix + i, 0, true}}, *single_kv, alone.data(), pool);
    ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + static_cast<size_t>(i) * n_vocab,
                             n_vocab * sizeof(float)))
        << "position " << n_prefix + i;
  }
}

// gemma3.final_logit_softcapping: logits = cap * tanh(logits / cap).
TEST(Transformer, FinalLogitSoftCapping) {
  K25_REQUIRE_SHARED();
  const std::string source = shared_path("models/random-gemma3.gguf");
  const std::shared_ptr<GgufFile> f = GgufFile::open(source);
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  w.set_f32("gemma3.final_logit_softcapping", 3.0f);
  for (const TensorView& t : f->tensors()) {
    w.add_tensor(t.name, t.type, {t.ne.begin(), t.ne.end()}, t.data, t.bytes);
  }
  const std::string capped_path = (std::filesystem::temp_directory_path() /
                                   ("k25_softcap_" + std::to_string(::getpid()) + ".gguf"))
                                      .string();
  w.write(capped_path);
  auto plain = Model::load(source);
  auto capped = Model::load(capped_path);
  std::filesystem::remove(capped_path);
  ThreadPool pool(1);
  const int n_vocab = plain->config().n_vocab;
  std::vector<float> a(n_vocab), b(n_vocab);
  auto kv_a = plain->make_kv_cache(), kv_b = capped->make_kv_cache();
  plain->forward({{5, 0, 0, true}}, *kv_a, a.data(), pool);
  capped->forward({{5, 0, 0, true}}, *kv_b, b.data(), pool);
  float largest = 0;
  for (int i = 0; i < n_vocab; ++i) {
    largest = std::max(largest, std::abs(a[i]));
    ASSERT_NEAR(b[i], 3.0f * std::tanh(a[i] / 3.0f), 1e-5f) << "token " << i;
  }
  EXPECT_GT(largest, 6.0f);  // the cap is felt
}

TEST(Transformer, RejectsTokensAndPositionsOutOfRange) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/stories260K.gguf"));
  ThreadPool pool(1);
  auto kv = model->make_kv_cache();
  std::vector<float> logits(model->config().n_vocab);
  EXPECT_THROW(model->forward({{512, 0, 0, true}}, *kv, logits.data(), pool), Error);
  EXPECT_THROW(model->forward({{-1, 0, 0, true}}, *kv, logits.data(), pool), Error);
  EXPECT_THROW(model->forward({{5, 512, 0, true}}, *kv, logits.data(), pool), Error);
}

TEST(Transformer, TokenNllIsLogSoftmax) {
  const float logits[3] = {1.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(token_nll(logits, 3, 2), -(3.0 - std::log(z)), 1e-6);
  EXPECT_NEAR(token_nll(logits, 3, 0), -(1.0 - std::log(z)), 1e-6);
}

TEST(Transformer, LoadErrorsAreClear) {
  try {
    Model::load("/nonexistent/model.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace k25
