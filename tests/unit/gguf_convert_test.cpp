// k25-convert's GGUF writer (model/gguf_convert.h): Hugging Face directories written by
// k25-mkmodel come back as the GGUF that k25-mkmodel wrote for the same seed, GGUF inputs are
// requantised as k25-mkmodel would have written them, bad requests are one clear error.
#include "model/gguf_convert.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "flash/flash_metadata.h"
#include "model/arch_params.h"
#include "model/convert_progress.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

class ConvertGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    K25_REQUIRE_SHARED();
    dir_ = fs::temp_directory_path() / ("k25_gguf_convert_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // k25-mkmodel's GGUF (and Hugging Face directory when `hf`) for a shape, seed 5.
  std::string mkmodel(const std::string& shape, OutType dtype, bool hf = false) {
    MkModelOptions o;
    o.shape = shape;
    o.dtype = dtype;
    o.seed = 5;
    o.vocab_dir = testing::shared_path("tokenizers/llamacpp-vocab");
    o.out_path = (dir_ / (shape + "-" + outtype_name(dtype) + ".gguf")).string();
    if (hf) o.hf_dir = (dir_ / (shape + "-hf")).string();
    make_model(o);
    return hf ? o.hf_dir : o.out_path;
  }
  GgufConvertResult convert(const std::string& in, const std::string& out,
                            std::optional<OutType> outtype) {
    GgufConvertOptions o;
    o.input = in;
    o.output = out;
    o.outtype = outtype;
    return convert_to_gguf(o);
  }
  fs::path dir_;
};

// Same names, shapes, types and bytes, in any order.
void expect_same_tensors(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const TensorView& t : a.tensors()) {
    const TensorView* u = b.tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(t.type, u->type) << t.name;
    EXPECT_EQ(t.ne, u->ne) << t.name;
    ASSERT_EQ(t.bytes, u->bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u->data, t.bytes), 0) << t.name;
  }
}

class ConvertGgufShapes : public ConvertGguf, public ::testing::WithParamInterface<std::string> {};

TEST_P(ConvertGgufShapes, HuggingFaceDirectoryBecomesTheSameGguf) {
  const std::string hf = mkmodel(GetParam(), OutType::F16, /*hf=*/true);
  const std::string gguf = (dir_ / (GetParam() + "-f16.gguf")).string();
  const std::string out = (dir_ / "converted.gguf").string();
  const GgufConvertResult r = convert(hf, out, std::nullopt);
  EXPECT_EQ(r.outtype, "f16");  // the safetensors' type
  const auto want = GgufFile::open(gguf), got = GgufFile::open(out);
  expect_same_tensors(*want, *got);
  for (const auto& [key, value] : want->metadata()) {
    if (key.starts_with("tokenizer.") || key == "general.name") continue;
    if (key == "general.quantization_version") continue;  // the converter always writes it
    const GgufValue* v = got->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(v->value == value.value) << key;
  }
  EXPECT_EQ(got->get_string_array("tokenizer.ggml.tokens").size(),
            want->get_string_array("tokenizer.ggml.tokens").size());
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvertGgufShapes,
                         ::testing::Values("tiny-llama-test", "tiny-llama3-test", "tiny-qwen2-test",
                                           "tiny-qwen3-test", "tiny-qwen3moe-test",
                                           "tiny-gemma3-test"));

TEST_F(ConvertGguf, RequantisingF16GivesWhatMkmodelWritesForTheType) {
  const std::string f16 = mkmodel("tiny-llama-test", OutType::F16);
  for (OutType type : {OutType::Q8_0, OutType::Q4_0, OutType::F32}) {
    SCOPED_TRACE(outtype_name(type));
    const std::string out = (dir_ / "requant.gguf").string();
    EXPECT_EQ(convert(f16, out, type).outtype, outtype_name(type));
    const auto want = GgufFile::open(mkmodel("tiny-llama-test", type));
    const auto got = GgufFile::open(out);
    expect_same_tensors(*want, *got);
    EXPECT_EQ(got->get_int("general.file_type"), want->get_int("general.file_type"));
  }
}

TEST_F(ConvertGguf, HuggingFaceToQ4KMMatchesMkmodelAndLoads) {
  const std::string hf = mkmodel("tiny-llama-kq-test", OutType::F16, /*hf=*/true);
  const std::string out = (dir_ / "q4_k_m.gguf").string();
  convert(hf, out, OutType::Q4_K_M);
  const auto got = GgufFile::open(out);
  expect_same_tensors(*GgufFile::open(mkmodel("tiny-llama-kq-test", OutType::Q4_K_M)), *got);
  EXPECT_EQ(got->get_int("general.file_type"), 15);
  EXPECT_EQ(got->tensor("output.weight")->type, DType::Q6_K);
  EXPECT_EQ(got->tensor("blk.0.attn_v.weight")->type, DType::Q4_K);
  EXPECT_EQ(got->tensor("blk.1.attn_v.weight")->type, DType::Q6_K);
  EXPECT_EQ(got->tensor("blk.1.ffn_down.weight")->type, DType::Q6_K);
  auto model = Model::load(out);
  EXPECT_EQ(model->config().dim, 256);
}

// The F32 file llama.cpp quantised, quantised again by k25-convert: the same tensors in the same
// types and sizes (the files are the same size), and Q4_0 blocks byte for byte.
TEST_F(ConvertGguf, QuantisesAsLlamaQuantizeDid) {
  const std::string f32 = testing::shared_path("models/random-llama-kq-f32.gguf");
  for (OutType type : {OutType::Q4_0, OutType::Q4_K_M, OutType::Q5_K_S, OutType::Q6_K}) {
    SCOPED_TRACE(outtype_name(type));
    const std::string theirs =
        testing::shared_path(std::string("models/random-llama-kq-") + outtype_name(type) + ".gguf");
    const std::string out = (dir_ / "kq.gguf").string();
    convert(f32, out, type);
    EXPECT_EQ(fs::file_size(out), fs::file_size(theirs));
    const auto want = GgufFile::open(theirs), got = GgufFile::open(out);
    ASSERT_EQ(want->tensors().size(), got->tensors().size());
    for (const TensorView& t : want->tensors()) {
      const TensorView* u = got->tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      EXPECT_EQ(dtype_name(u->type), std::string(dtype_name(t.type))) << t.name;
      ASSERT_EQ(u->bytes, t.bytes) << t.name;
      if (t.type == DType::Q4_0 || t.type == DType::F32) {
        EXPECT_EQ(std::memcmp(u->data, t.data, t.bytes), 0) << t.name;
      }
    }
    EXPECT_EQ(got->get_int("general.file_type"), want->get_int("general.file_type"));
    EXPECT_EQ(got->get_int("general.quantization_version"), 2);
  }
}

TEST_F(ConvertGguf, CopyKeepsEveryTensorAndRefusesRequantisingQuantisedOnes) {
  const std::string q8 = mkmodel("tiny-llama-test", OutType::Q8_0);
  const std::string copy = (dir_ / "copy.gguf").string();
  EXPECT_EQ(convert(q8, copy, std::nullopt).outtype, "copy");
  expect_same_tensors(*GgufFile::open(q8), *GgufFile::open(copy));
  EXPECT_EQ(convert(q8, copy, OutType::Q8_0).outtype, "q8_0");  // same types: copies

  const std::string refused = (dir_ / "refused.gguf").string();
  try {
    convert(q8, refused, OutType::Q4_0);
    FAIL() << "requantising Q8_0 to Q4_0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'token_embd.weight' is already Q8_0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(refused));
  EXPECT_FALSE(fs::exists(refused + ".tmp"));
  EXPECT_THROW(convert((dir_ / "missing.gguf").string(), refused, OutType::F16), Error);
  EXPECT_THROW(convert(q8, q8, std::nullopt), Error);  // would overwrite its input
}

TEST_F(ConvertGguf, GatesRoundTripThroughGgufMetadata) {
  const std::string f16 = mkmodel("tiny-llama-test", OutType::F16);
  ModelConfig config;
  config.n_layers = 2;
  config.n_heads = 4;
  GateMlp gate = GateMlp::zero(kGateFeatures, 2, 4);
  gate.b2[1] = 0.25f;
  gate.head_off[5] = 1;
  const std::vector<DomainEntry> entries = {{"default", "default_gate.bin", 0.3, {}},
                                            {"legal", "legal_gate.bin", 0.4, {0x9f3a0c1e55d27b80}}};
  GgufConvertOptions o;
  o.input = f16;
  o.output = (dir_ / "gated.gguf").string();
  o.extra_metadata = flash_gguf_metadata(entries, {&gate, &gate});
  convert_to_gguf(o);
  const auto file = GgufFile::open(o.output);
  const auto meta = FlashMetadata::load_gguf(*file, config, 3);
  ASSERT_NE(meta, nullptr);
  EXPECT_EQ(meta->domains(), (std::vector<std::string>{"default", "legal"}));
  const DomainGate* legal = meta->find("legal");
  ASSERT_NE(legal, nullptr);
  EXPECT_DOUBLE_EQ(legal->entry.pruning_ratio, 0.4);
  EXPECT_EQ(legal->gate.serialize(), gate.serialize());
  EXPECT_EQ(FlashMetadata::find_gguf(o.output), o.output);
  // A file without gates has none; a gate for another shape is a clear error.
  EXPECT_EQ(FlashMetadata::load_gguf(*GgufFile::open(f16), config, 3), nullptr);
  config.n_layers = 3;
  EXPECT_THROW(FlashMetadata::load_gguf(*file, config, 3), Error);
}

TEST(ConvertArchParams, ReadsHuggingFaceConfigs) {
  nlohmann::json gemma = {
      {"model_type", "gemma3_text"},     {"hidden_size", 1152},      {"num_hidden_layers", 26},
      {"num_attention_heads", 4},        {"num_key_value_heads", 1}, {"head_dim", 256},
      {"intermediate_size", 6912},       {"vocab_size", 262144},     {"sliding_window", 512},
      {"rope_local_base_freq", 10000.0}, {"rope_theta", 1000000.0}};
  gemma["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                          "sliding_attention", "sliding_attention", "full_attention"};
  const ArchParams g = arch_params_from_hf_config(gemma, "config.json");
  EXPECT_EQ(g.arch, "gemma3");
  EXPECT_EQ(g.head_dim, 256);
  EXPECT_EQ(g.sliding_window, 512);
  EXPECT_EQ(g.sliding_window_pattern, 6);
  EXPECT_TRUE(g.tied_output);  // Gemma's default
  EXPECT_TRUE(g.qk_norm);

  nlohmann::json llama = {{"model_type", "llama"},    {"hidden_size", 2048},
                          {"num_hidden_layers", 16},  {"num_attention_heads", 32},
                          {"num_key_value_heads", 8}, {"intermediate_size", 8192},
                          {"vocab_size", 128256},     {"rope_theta", 500000.0}};
  llama["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", 32.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192}};
  const ArchParams l = arch_params_from_hf_config(llama, "config.json");
  EXPECT_EQ(l.rope_scaling, "llama3");
  EXPECT_FLOAT_EQ(l.rope_factor, 32.0f);
  EXPECT_EQ(l.head_dim, 64);
  llama["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  try {
    arch_params_from_hf_config(llama, "config.json");
    FAIL() << "unknown rope_scaling accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported rope_scaling type 'dynamic'"),
              std::string::npos);
  }
  llama["model_type"] = "mamba";
  EXPECT_THROW(arch_params_from_hf_config(llama, "config.json"), Error);
}

TEST(ConvertProgressBar, FinalLineOnlyWhenNotATerminal) {
  std::ostringstream quiet, bar;
  ConvertProgress q(&quiet, false, 2, 3000000);
  q.tensor(0, "token_embd.weight F16 -> Q8_0", 0);
  q.tensor(1, "output.weight F16 -> Q6_K", 1500000);
  q.finish();
  const std::string text = quiet.str();
  EXPECT_EQ(text.rfind("wrote 2 tensors, 3.0 MB, in ", 0), 0u) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  ConvertProgress b(&bar, true, 2, 3000000);
  b.tensor(1, "output.weight F16 -> Q6_K", 1500000);
  b.finish();
  EXPECT_NE(bar.str().find("\r[   2/2]  50% 1.5 MB/3.0 MB  output.weight F16 -> Q6_K"),
            std::string::npos)
      << bar.str();
  EXPECT_NE(bar.str().find("wrote 2 tensors, 3.0 MB"), std::string::npos);
  EXPECT_EQ(ConvertProgress::format_bytes(2940000000ULL), "2.94 GB");
}

}  // namespace
}  // namespace k25
