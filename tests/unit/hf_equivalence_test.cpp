// The same weights loaded from GGUF and from a Hugging Face directory give identical logits.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/mkmodel.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

std::vector<float> prompt_logits(Model& model, const std::string& text) {
  ThreadPool pool(2);
  const std::vector<TokenId> ids = model.tokenizer().encode(text, true, false);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i) batch.push_back({ids[i], static_cast<int>(i), 0, true});
  std::vector<float> logits(ids.size() * model.config().n_vocab);
  auto kv = model.make_kv_cache();
  model.forward(batch, *kv, logits.data(), pool);
  return logits;
}

class HfEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(HfEquivalence, GgufAndHuggingFaceGiveIdenticalLogits) {
  K25_REQUIRE_SHARED();
  const fs::path dir =
      fs::temp_directory_path() / ("k25_hf_eq_" + GetParam() + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  MkModelOptions options;
  options.shape = GetParam();
  options.dtype = DType::F16;
  options.out_path = (dir / "model.gguf").string();
  options.hf_dir = (dir / "hf").string();
  options.seed = 11;
  options.vocab_dir = testing::shared_path("tokenizers/llamacpp-vocab");
  make_model(options);

  auto gguf = Model::load(options.out_path);
  auto hf = Model::load(options.hf_dir);
  EXPECT_EQ(gguf->config().n_vocab, hf->config().n_vocab);
  EXPECT_EQ(gguf->config().n_layers, hf->config().n_layers);
  const std::string text = "The quick brown fox jumps over the lazy dog. 12345";
  EXPECT_EQ(gguf->tokenizer().encode(text, true, false), hf->tokenizer().encode(text, true, false));
  const std::vector<float> a = prompt_logits(*gguf, text), b = prompt_logits(*hf, text);
  ASSERT_EQ(a.size(), b.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " logits";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Shapes, HfEquivalence,
                         ::testing::Values("tiny-llama-test", "tiny-qwen2-test"));

}  // namespace
}  // namespace k25
