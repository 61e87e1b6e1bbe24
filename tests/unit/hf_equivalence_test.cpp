// The same weights loaded from GGUF and from a Hugging Face directory give identical logits.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/gguf_convert.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test_paths.h"
#include "tokenizer/hf_tokenizer_json.h"

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
  options.dtype = OutType::F16;
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

// k25-convert's GGUF of the Hugging Face directory computes what k25-mkmodel's GGUF of the same
// seed computes, bit for bit, for every architecture.
class HfConverted : public ::testing::TestWithParam<std::string> {};

TEST_P(HfConverted, SameLogitsAsTheGgufOfTheSameWeights) {
  K25_REQUIRE_SHARED();
  const fs::path dir =
      fs::temp_directory_path() / ("k25_hf_conv_" + GetParam() + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  MkModelOptions options;
  options.shape = GetParam();
  options.out_path = (dir / "model.gguf").string();
  options.hf_dir = (dir / "hf").string();
  options.seed = 12;
  options.vocab_dir = testing::shared_path("tokenizers/llamacpp-vocab");
  make_model(options);
  GgufConvertOptions convert;
  convert.input = options.hf_dir;
  convert.output = (dir / "converted.gguf").string();
  convert_to_gguf(convert);

  auto gguf = Model::load(options.out_path);
  auto converted = Model::load(convert.output);
  const std::string text = "The quick brown fox jumps over the lazy dog. 12345";
  EXPECT_EQ(gguf->tokenizer().encode(text, true, false),
            converted->tokenizer().encode(text, true, false));
  const std::vector<float> a = prompt_logits(*gguf, text), b = prompt_logits(*converted, text);
  ASSERT_EQ(a.size(), b.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " logits";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Shapes, HfConverted,
                         ::testing::Values("tiny-llama-test", "tiny-llama3-test", "tiny-qwen2-test",
                                           "tiny-qwen3-test", "tiny-qwen3moe-test",
                                           "tiny-gemma3-test"));

// k25-mkmodel has no Qwen3 or Gemma 3 shape: the Hugging Face directory is written here from the
// weights of the shared GGUF, under transformers' names. Neither architecture reorders Q/K rows
// (both rotate halves in both formats); Gemma stores each norm as multiplier - 1, which float
// cannot always hold exactly (multipliers below 0.5), so for Gemma the GGUF to compare with is a
// copy whose norms are (multiplier - 1) + 1: the same weights in both formats. Returns that GGUF.
std::string write_hf_copy(const std::string& model, const nlohmann::json& config,
                          const fs::path& dir) {
  const std::shared_ptr<GgufFile> f = GgufFile::open(testing::shared_path("models/" + model));
  const bool gemma = config["model_type"] == "gemma3_text";
  const std::map<std::string, std::string> names = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight",
       gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"}};
  std::vector<SafetensorsTensor> tensors;
  std::vector<std::vector<float>> shifted;  // Gemma norms, minus 1
  GgufWriter same_weights;
  for (const auto& [key, value] : f->metadata()) same_weights.set(key, value);
  shifted.reserve(f->tensors().size());
  for (const TensorView& t : f->tensors()) {
    std::string name;
    if (t.name == "token_embd.weight") {
      name = "model.embed_tokens.weight";
    } else if (t.name == "output_norm.weight") {
      name = "model.norm.weight";
    } else {
      const size_t dot = t.name.find('.', 4);  // blk.N.
      name = "model.layers." + t.name.substr(4, dot - 4) + "." + names.at(t.name.substr(dot + 1));
    }
    SafetensorsTensor out{name, t.type, {}, t.data, t.bytes};
    if (t.ne[1] > 1) out.shape = {t.ne[1], t.ne[0]};
    if (t.ne[1] == 1) out.shape = {t.ne[0]};
    if (gemma && name.ends_with("norm.weight")) {
      const float* w = static_cast<const float*>(t.data);
      std::vector<float>& s = shifted.emplace_back(w, w + t.ne[0]);
      for (float& v : s) v -= 1.0f;
      out.data = s.data();
      std::vector<float> restored = s;
      for (float& v : restored) v += 1.0f;
      same_weights.add_tensor(t.name, t.type, {t.ne[0]}, restored.data(), t.bytes);
    } else {
      same_weights.add_tensor(t.name, t.type, {t.ne.begin(), t.ne.end()}, t.data, t.bytes);
    }
    tensors.push_back(std::move(out));
  }
  fs::create_directories(dir);
  write_safetensors((dir / "model.safetensors").string(), tensors);
  std::ofstream(dir / "config.json") << config.dump(2);
  write_hf_tokenizer_json(Tokenizer::from_gguf(*f)->vocab(), (dir / "tokenizer.json").string());
  if (!gemma) return f->path();
  const std::string gguf = (dir / "same-weights.gguf").string();
  same_weights.write(gguf);
  return gguf;
}

struct HfCopyCase {
  std::string model;
  nlohmann::json config;
};

class HfEquivalenceArch : public ::testing::TestWithParam<HfCopyCase> {};

TEST_P(HfEquivalenceArch, GgufAndHuggingFaceGiveIdenticalLogits) {
  K25_REQUIRE_SHARED();
  const HfCopyCase& c = GetParam();
  const fs::path dir =
      fs::temp_directory_path() / ("k25_hf_arch_" + c.config["model_type"].get<std::string>() +
                                   "_" + std::to_string(::getpid()));
  const std::string gguf_path = write_hf_copy(c.model, c.config, dir / "hf");
  auto gguf = Model::load(gguf_path);
  auto hf = Model::load((dir / "hf").string());
  EXPECT_EQ(gguf->config().head_dim, hf->config().head_dim);
  // Longer than gemma3's 32-token window.
  std::string text;
  for (int i = 0; i < 4; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  ASSERT_EQ(gguf->tokenizer().encode(text, true, false), hf->tokenizer().encode(text, true, false));
  const std::vector<float> a = prompt_logits(*gguf, text), b = prompt_logits(*hf, text);
  ASSERT_EQ(a.size(), b.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " logits";
  fs::remove_all(dir);
}

const nlohmann::json kQwen3Config = {{"model_type", "qwen3"},    {"hidden_size", 128},
                                     {"intermediate_size", 384}, {"num_hidden_layers", 2},
                                     {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                     {"head_dim", 64},           {"rms_norm_eps", 1e-6},
                                     {"rope_theta", 1000000.0},  {"max_position_embeddings", 4096},
                                     {"vocab_size", 151936},     {"tie_word_embeddings", true}};

const nlohmann::json kGemma3Config = {{"model_type", "gemma3_text"},
                                      {"hidden_size", 256},
                                      {"intermediate_size", 768},
                                      {"num_hidden_layers", 2},
                                      {"num_attention_heads", 4},
                                      {"num_key_value_heads", 2},
                                      {"head_dim", 64},
                                      {"rms_norm_eps", 1e-6},
                                      {"rope_theta", 1000000.0},
                                      {"rope_local_base_freq", 10000.0},
                                      {"sliding_window", 32},
                                      {"sliding_window_pattern", 2},
                                      {"query_pre_attn_scalar", 64},
                                      {"final_logit_softcapping", nullptr},
                                      {"hidden_activation", "gelu_pytorch_tanh"},
                                      {"max_position_embeddings", 8192},
                                      {"vocab_size", 512}};

// Newer transformers configs list each layer's kind instead of a pattern.
nlohmann::json gemma3_with_layer_types() {
  nlohmann::json c = kGemma3Config;
  c.erase("sliding_window_pattern");
  c["layer_types"] = {"sliding_attention", "full_attention"};
  return c;
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfEquivalenceArch,
                         ::testing::Values(HfCopyCase{"random-qwen3.gguf", kQwen3Config},
                                           HfCopyCase{"random-gemma3.gguf", kGemma3Config},
                                           HfCopyCase{"random-gemma3.gguf",
                                                      gemma3_with_layer_types()}),
                         [](const ::testing::TestParamInfo<HfCopyCase>& info) {
                           return info.param.config["model_type"].get<std::string>() +
                                  (info.param.config.contains("layer_types") ? "_layer_types" : "");
                         });

}  // namespace
}  // namespace k25
