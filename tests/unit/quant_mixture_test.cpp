// The tensor types of each outtype: llama-quantize's default mixture, checked against the files
// llama.cpp's own llama-quantize wrote (../shared/models/random-llama-kq-*.gguf).
#include "model/quant_mixture.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/gguf.h"
#include "test_paths.h"

namespace k25 {
namespace {

using testing::shared_path;

std::vector<int64_t> shape_of(const TensorView& t) {
  return std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
}

TEST(ConvertMixture, MatchesLlamaQuantizeOnItsOwnFiles) {
  K25_REQUIRE_SHARED();
  const MixtureModel model{2, 0, false};
  for (const char* name : {"q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k", "q4_0"}) {
    SCOPED_TRACE(name);
    const auto file =
        GgufFile::open(shared_path(std::string("models/random-llama-kq-") + name + ".gguf"));
    const OutType outtype = parse_outtype(name);
    EXPECT_EQ(file->get_int("general.file_type"), outtype_file_type(outtype));
    for (const TensorView& t : file->tensors()) {
      EXPECT_EQ(dtype_name(tensor_type_for(t.name, shape_of(t), model, outtype)),
                std::string(dtype_name(t.type)))
          << t.name;
    }
  }
}

TEST(ConvertMixture, MoreBitsForTheUsualLayersOfTheMMixtures) {
  const MixtureModel m{16, 0, false};
  const std::vector<int64_t> v = {2048, 512}, down = {8192, 2048};
  // use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2.
  for (int layer = 0; layer < 16; ++layer) {
    const bool more = layer < 2 || layer >= 14 || (layer - 2) % 3 == 2;
    const std::string b = "blk." + std::to_string(layer) + ".";
    EXPECT_EQ(tensor_type_for(b + "attn_v.weight", v, m, OutType::Q4_K_M),
              more ? DType::Q6_K : DType::Q4_K)
        << layer;
    EXPECT_EQ(tensor_type_for(b + "ffn_down.weight", down, m, OutType::Q5_K_M),
              more ? DType::Q6_K : DType::Q5_K)
        << layer;
    EXPECT_EQ(tensor_type_for(b + "attn_v.weight", v, m, OutType::Q4_K_S),
              layer < 4 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(tensor_type_for(b + "ffn_down.weight", down, m, OutType::Q4_K_S),
              layer < 2 ? DType::Q5_K : DType::Q4_K);
    EXPECT_EQ(tensor_type_for(b + "attn_q.weight", {2048, 2048}, m, OutType::Q4_K_M), DType::Q4_K);
  }
}

TEST(ConvertMixture, OutputEmbeddingsFallbacksAndUnquantisedTensors) {
  const MixtureModel untied{2, 0, false}, tied{2, 0, true};
  EXPECT_EQ(tensor_type_for("output.weight", {256, 512}, untied, OutType::Q4_0), DType::Q6_K);
  EXPECT_EQ(tensor_type_for("output.weight", {256, 512}, untied, OutType::Q8_0), DType::Q8_0);
  EXPECT_EQ(tensor_type_for("token_embd.weight", {256, 512}, untied, OutType::Q4_0), DType::Q4_0);
  EXPECT_EQ(tensor_type_for("token_embd.weight", {256, 512}, tied, OutType::Q4_K_M), DType::Q6_K);
  // Rows of 896 (Qwen2.5-0.5B): no 256-block for the output; Q4_K falls back to Q5_0.
  EXPECT_EQ(tensor_type_for("token_embd.weight", {896, 512}, tied, OutType::Q4_K_M), DType::Q8_0);
  EXPECT_EQ(tensor_type_for("blk.0.attn_q.weight", {896, 896}, tied, OutType::Q4_K_M), DType::Q5_0);
  EXPECT_EQ(tensor_type_for("blk.0.attn_q.weight", {896, 896}, tied, OutType::Q5_K_S), DType::Q5_1);
  EXPECT_EQ(tensor_type_for("blk.0.attn_q.weight", {896, 896}, tied, OutType::Q6_K), DType::Q8_0);
  // Rows of 172 (stories260K's ffn_down): not even a 32-block, so F16.
  EXPECT_EQ(tensor_type_for("blk.0.ffn_down.weight", {172, 64}, tied, OutType::Q4_K_M), DType::F16);
  EXPECT_EQ(tensor_type_for("blk.0.ffn_down.weight", {172, 64}, tied, OutType::Q8_0), DType::F16);
  for (OutType o : {OutType::F16, OutType::Q4_K_M, OutType::Q8_0}) {
    EXPECT_EQ(tensor_type_for("blk.0.attn_norm.weight", {256}, untied, o), DType::F32);
    EXPECT_EQ(tensor_type_for("blk.0.attn_q_norm.weight", {64}, untied, o), DType::F32);
    EXPECT_EQ(tensor_type_for("blk.0.attn_q.bias", {256}, untied, o), DType::F32);
    EXPECT_EQ(tensor_type_for("rope_freqs.weight", {32}, untied, o), DType::F32);
    EXPECT_EQ(tensor_type_for("blk.0.ffn_gate_inp.weight", {256, 8}, untied, o), DType::F32);
  }
  EXPECT_EQ(tensor_type_for("blk.0.attn_q.weight", {256, 256}, untied, OutType::BF16), DType::BF16);
}

TEST(ConvertMixture, EightExpertModelsKeepAttentionAtMoreBits) {
  const MixtureModel moe{2, 8, false};
  EXPECT_EQ(tensor_type_for("blk.0.attn_v.weight", {256, 128}, moe, OutType::Q4_K_M), DType::Q8_0);
  EXPECT_EQ(tensor_type_for("blk.0.attn_k.weight", {256, 128}, moe, OutType::Q4_K_M), DType::Q8_0);
  EXPECT_EQ(tensor_type_for("blk.0.attn_output.weight", {256, 256}, moe, OutType::Q4_K_M),
            DType::Q5_K);
  EXPECT_EQ(tensor_type_for("blk.0.ffn_up_exps.weight", {256, 512, 8}, moe, OutType::Q4_K_M),
            DType::Q4_K);
  EXPECT_EQ(tensor_type_for("blk.1.ffn_down_exps.weight", {512, 256, 8}, moe, OutType::Q4_K_M),
            DType::Q6_K);  // the last layer of two
}

TEST(ConvertMixture, OuttypeNames) {
  EXPECT_EQ(parse_outtype("Q4_K_M"), OutType::Q4_K_M);
  EXPECT_EQ(std::string(outtype_name(OutType::Q5_K_S)), "q5_k_s");
  EXPECT_EQ(outtype_file_type(OutType::Q4_K_M), 15u);
  EXPECT_EQ(outtype_file_type(OutType::BF16), 32u);
  try {
    parse_outtype("q3_k_xl");
    FAIL() << "unknown outtype accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown outtype 'q3_k_xl'"), std::string::npos);
  }
}

}  // namespace
}  // namespace k25
