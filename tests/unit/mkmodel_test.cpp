// k25-mkmodel's model writer: GGUF metadata, tensors and vocabulary, the Hugging Face copy, and
// determinism by seed. Uses the tiny test shapes with the real vocabularies from ../shared.
#include "model/mkmodel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "kernels/quant.h"
#include "model/arch_params.h"
#include "model/mkmodel_random.h"
#include "model/mkmodel_shapes.h"
#include "model/tensor_layout.h"
#include "tokenizer/tokenizer.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

const std::string kVocabDir = std::string(K25_SHARED_DIR) + "/tokenizers/llamacpp-vocab";

class MkmodelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("k25-mkmodel-test-" + std::to_string(getpid())));
    fs::create_directories(*dir_);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!fs::is_directory(kVocabDir)) {
      GTEST_SKIP() << "SKIPPED: vocabulary directory " << kVocabDir
                   << " is absent; k25-mkmodel needs ../shared/tokenizers";
    }
  }

  static MkModelOptions options(const std::string& shape, OutType dtype, uint64_t seed,
                                const std::string& file) {
    MkModelOptions o;
    o.shape = shape;
    o.dtype = dtype;
    o.seed = seed;
    o.vocab_dir = kVocabDir;
    o.out_path = (*dir_ / file).string();
    return o;
  }
  // Writes (once per test suite) and returns the path of a model.
  static std::string model(const std::string& shape, OutType dtype, uint64_t seed = 7) {
    const std::string file =
        shape + "-" + outtype_name(dtype) + "-" + std::to_string(seed) + ".gguf";
    const fs::path path = *dir_ / file;
    if (!fs::exists(path)) make_model(options(shape, dtype, seed, file));
    return path.string();
  }
  static std::vector<float> dequantized(const TensorView& t) {
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    dequantize_row(t.type, t.data, out.data(), t.n_elements());
    return out;
  }

  static fs::path* dir_;
};

fs::path* MkmodelTest::dir_ = nullptr;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// GGUF tensor name -> expected ne, for a shape.
std::map<std::string, std::vector<int64_t>> expected_tensors(const ArchParams& c, int64_t n_vocab) {
  const int64_t dim = c.dim, kv = int64_t{c.n_kv_heads} * c.head_dim, ffn = c.ffn_dim;
  std::map<std::string, std::vector<int64_t>> t = {{"token_embd.weight", {dim, n_vocab}},
                                                   {"output_norm.weight", {dim}}};
  if (!c.tied_output) t["output.weight"] = {dim, n_vocab};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t[b + "attn_norm.weight"] = {dim};
    t[b + "attn_q.weight"] = {dim, dim};
    t[b + "attn_k.weight"] = {dim, kv};
    t[b + "attn_v.weight"] = {dim, kv};
    t[b + "attn_output.weight"] = {dim, dim};
    t[b + "ffn_norm.weight"] = {dim};
    t[b + "ffn_gate.weight"] = {dim, ffn};
    t[b + "ffn_up.weight"] = {dim, ffn};
    t[b + "ffn_down.weight"] = {ffn, dim};
    if (c.qkv_bias) {
      t[b + "attn_q.bias"] = {dim};
      t[b + "attn_k.bias"] = {kv};
      t[b + "attn_v.bias"] = {kv};
    }
  }
  return t;
}

TEST_F(MkmodelTest, KnowsTheRealShapes) {
  const ArchParams& tl = find_mkmodel_shape("tinyllama-1.1b").params;
  EXPECT_EQ(tl.arch, "llama");
  EXPECT_EQ(tl.dim, 2048);
  EXPECT_EQ(tl.n_layers, 22);
  EXPECT_EQ(tl.n_heads, 32);
  EXPECT_EQ(tl.n_kv_heads, 4);
  EXPECT_EQ(tl.ffn_dim, 5632);
  EXPECT_FALSE(tl.tied_output);
  const ArchParams& qw = find_mkmodel_shape("qwen2.5-0.5b").params;
  EXPECT_EQ(qw.arch, "qwen2");
  EXPECT_EQ(qw.dim, 896);
  EXPECT_EQ(qw.n_layers, 24);
  EXPECT_EQ(qw.n_heads, 14);
  EXPECT_EQ(qw.n_kv_heads, 2);
  EXPECT_EQ(qw.ffn_dim, 4864);
  EXPECT_EQ(qw.context_length, 32768);
  EXPECT_FLOAT_EQ(qw.rope_theta, 1e6f);
  EXPECT_TRUE(qw.qkv_bias);
  EXPECT_TRUE(qw.tied_output);
  EXPECT_THROW(find_mkmodel_shape("gpt-5"), Error);
  EXPECT_EQ(parse_mkmodel_dtype("Q4_0"), OutType::Q4_0);
  EXPECT_EQ(parse_mkmodel_dtype("q4_k_m"), OutType::Q4_K_M);
  EXPECT_THROW(parse_mkmodel_dtype("q4_k"), Error);
}

TEST_F(MkmodelTest, GgufHasMetadataTensorsAndVocabulary) {
  struct Case {
    const char* shape;
    const char* arch;
    const char* vocab;
  };
  for (const Case& c : {Case{"tiny-llama-test", "llama", "ggml-vocab-llama-spm.gguf"},
                        Case{"tiny-qwen2-test", "qwen2", "ggml-vocab-qwen2.gguf"}}) {
    const auto vocab = GgufFile::open(kVocabDir + "/" + c.vocab);
    const int64_t n_vocab =
        static_cast<int64_t>(vocab->get_string_array("tokenizer.ggml.tokens").size());
    const ArchParams& config = find_mkmodel_shape(c.shape).params;
    for (const auto& [dtype, file_type] :
         {std::pair{OutType::F16, 1}, {OutType::Q8_0, 7}, {OutType::Q4_0, 2}}) {
      SCOPED_TRACE(std::string(c.shape) + " " + outtype_name(dtype));
      const auto f = GgufFile::open(model(c.shape, dtype));
      const std::string a = c.arch;
      EXPECT_EQ(f->version(), 3u);
      EXPECT_EQ(f->get_string("general.architecture"), a);
      EXPECT_FALSE(f->get_string("general.name").empty());
      EXPECT_EQ(f->get_int("general.file_type"), file_type);
      EXPECT_EQ(f->get_int(a + ".context_length"), config.context_length);
      EXPECT_EQ(f->get_int(a + ".embedding_length"), 64);
      EXPECT_EQ(f->get_int(a + ".block_count"), 2);
      EXPECT_EQ(f->get_int(a + ".feed_forward_length"), 128);
      EXPECT_EQ(f->get_int(a + ".attention.head_count"), 4);
      EXPECT_EQ(f->get_int(a + ".attention.head_count_kv"), 2);
      EXPECT_EQ(f->get_int(a + ".rope.dimension_count"), 16);
      EXPECT_FLOAT_EQ(static_cast<float>(f->get_float(a + ".rope.freq_base")), config.rope_theta);
      EXPECT_FLOAT_EQ(static_cast<float>(f->get_float(a + ".attention.layer_norm_rms_epsilon")),
                      config.rms_eps);

      // Every tokenizer key of the vocabulary file, copied with its type and value.
      int copied = 0;
      for (const auto& [key, value] : vocab->metadata()) {
        if (!key.starts_with("tokenizer.")) continue;
        ++copied;
        const GgufValue* got = f->find(key);
        ASSERT_NE(got, nullptr) << key;
        EXPECT_EQ(got->type, value.type) << key;
        if (value.type == GgufType::ARRAY) {
          EXPECT_EQ(got->array_type, value.array_type) << key;
        }
        EXPECT_TRUE(got->value == value.value) << key;
      }
      EXPECT_GE(copied, 5);

      const auto expected = expected_tensors(config, n_vocab);
      EXPECT_EQ(f->tensors().size(), expected.size());
      for (const auto& [name, ne] : expected) {
        const TensorView* t = f->tensor(name);
        ASSERT_NE(t, nullptr) << name;
        ASSERT_EQ(t->n_dims, static_cast<int>(ne.size())) << name;
        for (size_t d = 0; d < ne.size(); ++d) EXPECT_EQ(t->ne[d], ne[d]) << name;
        // Norms and biases stay F32. The output matrix (token_embd when tied) gets Q6_K in a
        // Q4_0 file, or Q8_0 as here where its rows of 64 do not fill a 256-block.
        const bool output =
            name == "output.weight" || (config.tied_output && name == "token_embd.weight");
        DType want = outtype_base_type(dtype);
        if (ne.size() == 1) want = DType::F32;
        if (output && dtype == OutType::Q4_0) want = DType::Q8_0;
        EXPECT_EQ(t->type, want) << name;
      }
    }
  }
}

TEST_F(MkmodelTest, AllDtypesHoldTheSameWeights) {
  const auto f32 = GgufFile::open(model("tiny-qwen2-test", OutType::F32));
  const auto f16 = GgufFile::open(model("tiny-qwen2-test", OutType::F16));
  const auto q8 = GgufFile::open(model("tiny-qwen2-test", OutType::Q8_0));
  const auto q4 = GgufFile::open(model("tiny-qwen2-test", OutType::Q4_0));
  for (const char* name : {"token_embd.weight", "blk.1.attn_k.weight", "blk.0.ffn_down.weight"}) {
    SCOPED_TRACE(name);
    const std::vector<float> exact = dequantized(*f32->tensor(name));
    const std::vector<float> half = dequantized(*f16->tensor(name));
    const std::vector<float> v8 = dequantized(*q8->tensor(name));
    const std::vector<float> v4 = dequantized(*q4->tensor(name));
    EXPECT_EQ(exact, half);  // values are rounded to float16 before either is written
    double sum_sq = 0, err8 = 0, err4 = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      sum_sq += exact[i] * exact[i];
      err8 = std::max(err8, static_cast<double>(std::fabs(v8[i] - exact[i])));
      err4 = std::max(err4, static_cast<double>(std::fabs(v4[i] - exact[i])));
    }
    // Uniform weights with standard deviation 0.02, max |w| = 0.0346.
    EXPECT_NEAR(std::sqrt(sum_sq / static_cast<double>(exact.size())), 0.02, 0.002);
    EXPECT_LT(err8, 0.0346 / 127);
    EXPECT_LT(err4, 0.0346 / 7);
  }
  const std::vector<float> norm = dequantized(*f16->tensor("blk.0.ffn_norm.weight"));
  const std::vector<float> norm_q4 = dequantized(*q4->tensor("blk.0.ffn_norm.weight"));
  EXPECT_EQ(norm, norm_q4);
  float lo = 2, hi = 0;
  for (float v : norm) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, 0.95f);
  EXPECT_LE(hi, 1.05f);
  EXPECT_LT(lo, hi);
}

TEST_F(MkmodelTest, DeterministicBySeed) {
  const std::string a = read_all(model("tiny-llama-test", OutType::Q4_0, 7));
  make_model(options("tiny-llama-test", OutType::Q4_0, 7, "again.gguf"));
  const std::string b = read_all((*dir_ / "again.gguf").string());
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "same seed gave different files";
  const auto seven = GgufFile::open(model("tiny-llama-test", OutType::F16, 7));
  const auto eight = GgufFile::open(model("tiny-llama-test", OutType::F16, 8));
  const TensorView* x = seven->tensor("blk.0.attn_q.weight");
  const TensorView* y = eight->tensor("blk.0.attn_q.weight");
  ASSERT_EQ(x->bytes, y->bytes);
  EXPECT_NE(std::memcmp(x->data, y->data, x->bytes), 0) << "different seeds gave the same weights";
}

TEST_F(MkmodelTest, ContextLengthReplacesTheShapes) {
  MkModelOptions o = options("tiny-llama-test", OutType::F16, 7, "long.gguf");
  o.context_length = 8192;
  make_model(o);
  EXPECT_EQ(GgufFile::open(o.out_path)->get_int("llama.context_length"), 8192);
  EXPECT_NE(find_mkmodel_shape("tiny-llama-test").params.context_length, 8192);
  o.context_length = -1;
  EXPECT_THROW(make_model(o), Error);
}

TEST(MkmodelRandomTest, ValuesDoNotDependOnThreadCount) {
  ThreadPool one(1), three(3);
  const int64_t n = 200000;  // several chunks, the last one partial
  const std::vector<float> a =
      mkmodel_random_values(5, "blk.0.ffn_up.weight", MkInit::Matrix, n, one);
  const std::vector<float> b =
      mkmodel_random_values(5, "blk.0.ffn_up.weight", MkInit::Matrix, n, three);
  EXPECT_EQ(a, b);
  const std::vector<float> c =
      mkmodel_random_values(5, "blk.0.ffn_gate.weight", MkInit::Matrix, n, one);
  EXPECT_NE(a, c);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 1000),
            std::vector<float>(a.begin() + 65536, a.begin() + 66536));  // chunks differ
}

TEST_F(MkmodelTest, RejectsBadRequests) {
  MkModelOptions o = options("tiny-llama-test", OutType::Q8_0, 1, "bad.gguf");
  o.hf_dir = (*dir_ / "bad-hf").string();
  EXPECT_THROW(make_model(o), Error);  // Hugging Face copies are F16 only
  o = options("tiny-llama-test", OutType::F16, 1, "bad.gguf");
  o.vocab_dir = (*dir_ / "no-such-dir").string();
  try {
    make_model(o);
    FAIL() << "missing vocabulary accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ggml-vocab-llama-spm.gguf"), std::string::npos)
        << e.what();
  }
  o = options("no-such-shape", OutType::F16, 1, "bad.gguf");
  EXPECT_THROW(make_model(o), Error);
  EXPECT_FALSE(fs::exists(*dir_ / "bad.gguf"));
}

// The Hugging Face copy holds the same float16 weights, with Llama's q/k rows in rotate-half
// order: GGUF row 2*i + j of a head is Hugging Face row j * head_dim/2 + i.
void expect_same_rows(const TensorView& gguf, const TensorView& hf, int n_heads) {
  ASSERT_EQ(hf.type, DType::F16);
  ASSERT_EQ(gguf.type, DType::F16);
  ASSERT_EQ(hf.ne[0], gguf.ne[0]);
  ASSERT_EQ(hf.ne[1], gguf.ne[1]);
  const int64_t rows = gguf.ne[1], width = gguf.ne[0];
  const int64_t head_rows = n_heads > 0 ? rows / n_heads : rows, half = head_rows / 2;
  const auto* g = static_cast<const uint16_t*>(gguf.data);
  const auto* h = static_cast<const uint16_t*>(hf.data);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t hr = r;
    if (n_heads > 0) {
      const int64_t head = r / head_rows, i = (r % head_rows) / 2, j = r % 2;
      hr = head * head_rows + j * half + i;
    }
    ASSERT_EQ(std::memcmp(g + r * width, h + hr * width, width * 2), 0) << hf.name << " row " << r;
  }
}

TEST_F(MkmodelTest, HuggingFaceLlamaDirectory) {
  MkModelOptions o = options("tiny-llama-test", OutType::F16, 7, "hf-llama.gguf");
  o.hf_dir = (*dir_ / "hf-llama").string();
  make_model(o);
  const nlohmann::json config = nlohmann::json::parse(read_all(o.hf_dir + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 64);
  EXPECT_EQ(config["intermediate_size"], 128);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 4);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["vocab_size"], 32000);
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_EQ(config["torch_dtype"], "float16");
  EXPECT_EQ(config["bos_token_id"], 1);
  EXPECT_EQ(config["eos_token_id"], 2);
  EXPECT_DOUBLE_EQ(config["rms_norm_eps"].get<double>(), 1e-5);
  EXPECT_DOUBLE_EQ(config["rope_theta"].get<double>(), 10000.0);

  const auto gguf = GgufFile::open(o.out_path);
  const auto set = SafetensorsSet::open_dir(o.hf_dir);
  EXPECT_EQ(set->tensors().size(), gguf->tensors().size());
  expect_same_rows(*gguf->tensor("token_embd.weight"), set->require("model.embed_tokens.weight"),
                   0);
  expect_same_rows(*gguf->tensor("output.weight"), set->require("lm_head.weight"), 0);
  expect_same_rows(*gguf->tensor("blk.1.attn_q.weight"),
                   set->require("model.layers.1.self_attn.q_proj.weight"), 4);
  expect_same_rows(*gguf->tensor("blk.1.attn_k.weight"),
                   set->require("model.layers.1.self_attn.k_proj.weight"), 2);
  expect_same_rows(*gguf->tensor("blk.1.attn_v.weight"),
                   set->require("model.layers.1.self_attn.v_proj.weight"), 0);
  expect_same_rows(*gguf->tensor("blk.0.ffn_down.weight"),
                   set->require("model.layers.0.mlp.down_proj.weight"), 0);
  const TensorView& norm = set->require("model.layers.0.post_attention_layernorm.weight");
  const std::vector<float> hf_norm = dequantized(norm);
  EXPECT_EQ(hf_norm, dequantized(*gguf->tensor("blk.0.ffn_norm.weight")));
  EXPECT_EQ(set->tensor("model.layers.0.self_attn.q_proj.bias"), nullptr);

  const auto tokenizer = Tokenizer::from_hf_json(o.hf_dir + "/tokenizer.json");
  EXPECT_EQ(tokenizer->n_vocab(), 32000);
}

TEST_F(MkmodelTest, HuggingFaceQwen2ShardedDirectory) {
  MkModelOptions o = options("tiny-qwen2-test", OutType::F16, 7, "hf-qwen2.gguf");
  o.hf_dir = (*dir_ / "hf-qwen2").string();
  o.hf_sharded = true;
  make_model(o);
  const nlohmann::json config = nlohmann::json::parse(read_all(o.hf_dir + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(config["model_type"], "qwen2");
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["vocab_size"], 151936);
  EXPECT_DOUBLE_EQ(config["rope_theta"].get<double>(), 1e6);
  EXPECT_DOUBLE_EQ(config["rms_norm_eps"].get<double>(), 1e-6);

  EXPECT_FALSE(fs::exists(o.hf_dir + "/model.safetensors"));
  const nlohmann::json index =
      nlohmann::json::parse(read_all(o.hf_dir + "/model.safetensors.index.json"));
  std::set<std::string> shards;
  for (const auto& [name, file] : index["weight_map"].items())
    shards.insert(file.get<std::string>());
  EXPECT_EQ(shards.size(), 2u);

  const auto gguf = GgufFile::open(o.out_path);
  const auto set = SafetensorsSet::open_dir(o.hf_dir);
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->tensors().size(), gguf->tensors().size());
  EXPECT_EQ(index["weight_map"].size(), gguf->tensors().size());
  EXPECT_EQ(set->tensor("lm_head.weight"), nullptr);
  // Qwen2 uses the halves rotation in both formats: q/k rows are not reordered.
  expect_same_rows(*gguf->tensor("blk.0.attn_q.weight"),
                   set->require("model.layers.0.self_attn.q_proj.weight"), 0);
  expect_same_rows(*gguf->tensor("blk.0.attn_k.weight"),
                   set->require("model.layers.0.self_attn.k_proj.weight"), 0);
  const TensorView& bias = set->require("model.layers.1.self_attn.k_proj.bias");
  EXPECT_EQ(bias.ne[0], 32);
  EXPECT_EQ(dequantized(bias), dequantized(*gguf->tensor("blk.1.attn_k.bias")));
}

TEST_F(MkmodelTest, KnowsTheNewShapes) {
  const ArchParams& l3 = find_mkmodel_shape("llama3.2-1b").params;
  EXPECT_EQ(l3.arch, "llama");
  EXPECT_EQ(l3.dim, 2048);
  EXPECT_EQ(l3.n_layers, 16);
  EXPECT_EQ(l3.n_heads, 32);
  EXPECT_EQ(l3.n_kv_heads, 8);
  EXPECT_EQ(l3.head_dim, 64);
  EXPECT_EQ(l3.ffn_dim, 8192);
  EXPECT_FLOAT_EQ(l3.rope_theta, 500000.0f);
  EXPECT_EQ(l3.rope_scaling, "llama3");
  EXPECT_FLOAT_EQ(l3.rope_factor, 32.0f);
  EXPECT_EQ(l3.rope_original_context, 8192);
  EXPECT_TRUE(l3.tied_output);
  EXPECT_EQ(find_mkmodel_shape("llama3.2-1b").vocab_file, "ggml-vocab-llama-bpe.gguf");
  const ArchParams& q3 = find_mkmodel_shape("qwen3-0.6b").params;
  EXPECT_EQ(q3.arch, "qwen3");
  EXPECT_EQ(q3.dim, 1024);
  EXPECT_EQ(q3.n_layers, 28);
  EXPECT_EQ(q3.head_dim, 128);
  EXPECT_EQ(q3.ffn_dim, 3072);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_TRUE(q3.tied_output);
  const ArchParams& moe = find_mkmodel_shape("qwen3moe-small").params;
  EXPECT_EQ(moe.arch, "qwen3moe");
  EXPECT_GE(moe.n_experts, 8);
  EXPECT_EQ(moe.n_experts_used, 4);
  EXPECT_EQ(moe.expert_ffn_dim, 768);
  const ArchParams& g = find_mkmodel_shape("gemma3-1b").params;
  EXPECT_EQ(g.arch, "gemma3");
  EXPECT_EQ(g.dim, 1152);
  EXPECT_EQ(g.n_layers, 26);
  EXPECT_EQ(g.n_heads, 4);
  EXPECT_EQ(g.n_kv_heads, 1);
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_EQ(g.ffn_dim, 6912);
  EXPECT_EQ(g.sliding_window, 512);
  EXPECT_EQ(g.sliding_window_pattern, 6);
  EXPECT_FLOAT_EQ(g.rope_theta_swa, 10000.0f);
}

// llama.cpp's converter computed rope_freqs for random-llama3-rope.gguf (factor 8, base 500000,
// head dim 64); ours must give the same divisors.
TEST_F(MkmodelTest, Llama3RopeFactorsAreTheConvertersOwn) {
  const auto file = GgufFile::open(std::string(K25_SHARED_DIR) + "/models/random-llama3-rope.gguf");
  const TensorView* t = file->tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  ArchParams p;
  p.head_dim = 64;
  p.rope_theta = 500000.0f;
  p.rope_factor = 8.0f;
  p.rope_low_freq_factor = 1.0f;
  p.rope_high_freq_factor = 4.0f;
  p.rope_original_context = 8192;
  const std::vector<float> ours = llama3_rope_factors(p);
  ASSERT_EQ(static_cast<int64_t>(ours.size()), t->ne[0]);
  const std::vector<float> theirs = dequantized(*t);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], theirs[i], 1e-6f * theirs[i]) << i;
}

std::vector<int64_t> shape_of(const TensorView& t) {
  return std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
}

// The layouts of ../shared/models/README.md: names, shapes, types and the architecture keys.
TEST_F(MkmodelTest, NewArchitecturesHaveTheGgufLayout) {
  const auto qwen3 = GgufFile::open(model("tiny-qwen3-test", OutType::F16));
  EXPECT_EQ(qwen3->get_string("general.architecture"), "qwen3");
  EXPECT_EQ(qwen3->get_int("qwen3.attention.key_length"), 32);
  EXPECT_EQ(qwen3->get_int("qwen3.attention.value_length"), 32);
  EXPECT_EQ(shape_of(*qwen3->tensor("blk.0.attn_q.weight")), (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(shape_of(*qwen3->tensor("blk.0.attn_k.weight")), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(shape_of(*qwen3->tensor("blk.0.attn_output.weight")), (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(shape_of(*qwen3->tensor("blk.1.attn_q_norm.weight")), (std::vector<int64_t>{32}));
  EXPECT_EQ(qwen3->tensor("blk.1.attn_k_norm.weight")->type, DType::F32);
  EXPECT_EQ(qwen3->tensor("output.weight"), nullptr);
  EXPECT_EQ(qwen3->tensor("blk.0.attn_q.bias"), nullptr);

  const auto moe = GgufFile::open(model("tiny-qwen3moe-test", OutType::Q8_0));
  EXPECT_EQ(moe->get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(moe->get_int("qwen3moe.expert_count"), 8);
  EXPECT_EQ(moe->get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(moe->get_int("qwen3moe.expert_feed_forward_length"), 64);
  const TensorView* router = moe->tensor("blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(router->type, DType::F32);
  EXPECT_EQ(shape_of(*router), (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(shape_of(*moe->tensor("blk.0.ffn_gate_exps.weight")),
            (std::vector<int64_t>{64, 64, 8}));
  EXPECT_EQ(shape_of(*moe->tensor("blk.1.ffn_down_exps.weight")),
            (std::vector<int64_t>{64, 64, 8}));
  EXPECT_EQ(moe->tensor("blk.1.ffn_up_exps.weight")->type, DType::Q8_0);
  EXPECT_EQ(moe->tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_NE(moe->tensor("output.weight"), nullptr);

  const auto gemma = GgufFile::open(model("tiny-gemma3-test", OutType::F16));
  EXPECT_EQ(gemma->get_string("general.architecture"), "gemma3");
  EXPECT_EQ(gemma->get_int("gemma3.attention.sliding_window"), 32);
  EXPECT_EQ(gemma->get_int("gemma3.attention.sliding_window_pattern"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(gemma->get_float("gemma3.rope.freq_base")), 1e6f);
  EXPECT_FLOAT_EQ(static_cast<float>(gemma->get_float("gemma3.rope.freq_base_swa")), 1e4f);
  for (const char* n : {"attn_norm", "attn_q_norm", "attn_k_norm", "post_attention_norm",
                        "ffn_norm", "post_ffw_norm"}) {
    EXPECT_NE(gemma->tensor(std::string("blk.1.") + n + ".weight"), nullptr) << n;
  }
  EXPECT_EQ(gemma->tensor("output.weight"), nullptr);

  const auto llama3 = GgufFile::open(model("tiny-llama3-test", OutType::F16));
  EXPECT_EQ(llama3->tensors().front().name, "rope_freqs.weight");
  const TensorView* freqs = llama3->tensor("rope_freqs.weight");
  EXPECT_EQ(freqs->type, DType::F32);
  EXPECT_EQ(dequantized(*freqs),
            llama3_rope_factors(find_mkmodel_shape("tiny-llama3-test").params));
  EXPECT_FLOAT_EQ(static_cast<float>(llama3->get_float("llama.rope.freq_base")), 500000.0f);
}

TEST_F(MkmodelTest, KQuantMixtureByDtype) {
  const auto f = GgufFile::open(model("tiny-llama-kq-test", OutType::Q4_K_M));
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  EXPECT_EQ(f->tensor("token_embd.weight")->type, DType::Q4_K);
  EXPECT_EQ(f->tensor("output.weight")->type, DType::Q6_K);
  EXPECT_EQ(f->tensor("blk.0.attn_v.weight")->type, DType::Q4_K);
  EXPECT_EQ(f->tensor("blk.1.attn_v.weight")->type, DType::Q6_K);
  EXPECT_EQ(f->tensor("blk.0.ffn_down.weight")->type, DType::Q4_K);
  EXPECT_EQ(f->tensor("blk.1.ffn_down.weight")->type, DType::Q6_K);
  EXPECT_EQ(f->tensor("blk.0.attn_norm.weight")->type, DType::F32);
  // Rows of 64 have no 256-block: the K-quants fall back as llama-quantize does.
  const auto tiny = GgufFile::open(model("tiny-llama-test", OutType::Q6_K));
  EXPECT_EQ(tiny->tensor("blk.0.attn_q.weight")->type, DType::Q8_0);
}

TEST_F(MkmodelTest, HuggingFaceMoeAndGemmaDirectories) {
  MkModelOptions o = options("tiny-qwen3moe-test", OutType::F16, 7, "hf-moe.gguf");
  o.hf_dir = (*dir_ / "hf-moe").string();
  make_model(o);
  nlohmann::json config = nlohmann::json::parse(read_all(o.hf_dir + "/config.json"));
  EXPECT_EQ(config["model_type"], "qwen3_moe");
  EXPECT_EQ(config["num_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["moe_intermediate_size"], 64);
  EXPECT_EQ(config["head_dim"], 32);
  auto gguf = GgufFile::open(o.out_path);
  auto set = SafetensorsSet::open_dir(o.hf_dir);
  // Expert 3 of the stacked GGUF tensor is its own Hugging Face matrix.
  const TensorView* stacked = gguf->tensor("blk.1.ffn_up_exps.weight");
  const TensorView& expert = set->require("model.layers.1.mlp.experts.3.up_proj.weight");
  ASSERT_EQ(expert.bytes * 8, stacked->bytes);
  EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(stacked->data) + 3 * expert.bytes, expert.data,
                        expert.bytes),
            0);
  EXPECT_NE(set->tensor("model.layers.0.mlp.gate.weight"), nullptr);

  o = options("tiny-gemma3-test", OutType::F16, 7, "hf-gemma.gguf");
  o.hf_dir = (*dir_ / "hf-gemma").string();
  make_model(o);
  config = nlohmann::json::parse(read_all(o.hf_dir + "/config.json"));
  EXPECT_EQ(config["model_type"], "gemma3_text");
  EXPECT_EQ(config["sliding_window"], 32);
  EXPECT_EQ(config["sliding_window_pattern"], 2);
  gguf = GgufFile::open(o.out_path);
  set = SafetensorsSet::open_dir(o.hf_dir);
  // Gemma's norms compute (1 + w): Hugging Face stores w, GGUF 1 + w.
  const std::vector<float> hf =
      dequantized(set->require("model.layers.0.post_feedforward_layernorm.weight"));
  const std::vector<float> gg = dequantized(*gguf->tensor("blk.0.post_ffw_norm.weight"));
  ASSERT_EQ(hf.size(), gg.size());
  for (size_t i = 0; i < hf.size(); ++i) EXPECT_EQ(hf[i] + 1.0f, gg[i]) << i;
}

}  // namespace
}  // namespace k25
