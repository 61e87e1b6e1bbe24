// RoPE angles (plain, Llama 3 factors, linear, YaRN) against the formulas computed here in
// double precision, and the GGUF metadata that selects them.
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <numbers>
#include <set>

#include "core/error.h"
#include "formats/gguf.h"
#include "model/hf_rope_scaling.h"
#include "model/weights.h"
#include "test_paths.h"

namespace k25 {
namespace {

constexpr int kRopeDim = 32;

std::vector<float> cos_sin(const RopeSpec& spec, int pos) {
  std::vector<float> out(kRopeDim);
  Rope(spec, kRopeDim).cos_sin(pos, out.data());
  return out;
}

// Expected cos/sin of pair i for angle `theta` and magnitude `mscale`.
void expect_pair(const std::vector<float>& got, int i, double theta, double mscale) {
  EXPECT_NEAR(got[2 * i], std::cos(theta) * mscale, 2e-5) << "pair " << i;
  EXPECT_NEAR(got[2 * i + 1], std::sin(theta) * mscale, 2e-5) << "pair " << i;
}

double unscaled_angle(double base, int pos, int i) {
  return pos * std::pow(base, -2.0 * i / kRopeDim);
}

TEST(Rope, PlainAnglesArePositionTimesInverseFrequency) {
  RopeSpec spec;
  spec.base = 10000.0f;
  const std::vector<float> got = cos_sin(spec, 37);
  for (int i = 0; i < kRopeDim / 2; ++i) expect_pair(got, i, unscaled_angle(1e4, 37, i), 1.0);
}

TEST(Rope, FrequencyFactorsDivideEachAngleAndLinearScalingThePosition) {
  RopeSpec spec;
  spec.base = 500000.0f;
  for (int i = 0; i < kRopeDim / 2; ++i) spec.freq_factors.push_back(1.0f + 0.5f * i);
  std::vector<float> got = cos_sin(spec, 9);
  for (int i = 0; i < kRopeDim / 2; ++i) {
    expect_pair(got, i, unscaled_angle(5e5, 9, i) / (1.0 + 0.5 * i), 1.0);
  }
  RopeSpec linear;
  linear.base = 500000.0f;
  linear.freq_scale = 0.25f;
  got = cos_sin(linear, 9);
  for (int i = 0; i < kRopeDim / 2; ++i) expect_pair(got, i, unscaled_angle(5e5, 9, i) / 4, 1.0);
}

TEST(Rope, AttentionFactorScalesCosAndSin) {
  RopeSpec spec;
  spec.attn_factor = 1.25f;
  const std::vector<float> got = cos_sin(spec, 3);
  for (int i = 0; i < kRopeDim / 2; ++i) expect_pair(got, i, unscaled_angle(1e4, 3, i), 1.25);
}

// YaRN (Peng et al.; llama.cpp's rope_yarn): pairs that turn more than beta_fast times over the
// original context keep their angle, those turning fewer than beta_slow times are interpolated
// (divided by the factor), a linear ramp over the pair index blends the two in between, and
// cos/sin are scaled by attn_factor * (1 + 0.1 ln factor).
TEST(Rope, YarnBlendsExtrapolatedAndInterpolatedAnglesAndScalesTheMagnitude) {
  const double base = 10000, factor = 4, orig_context = 512, beta_fast = 32, beta_slow = 1;
  const double attn_factor = 1.1;
  RopeSpec spec;
  spec.base = static_cast<float>(base);
  spec.freq_scale = static_cast<float>(1 / factor);
  spec.yarn = true;
  spec.yarn_orig_context = static_cast<int>(orig_context);
  spec.yarn_beta_fast = static_cast<float>(beta_fast);
  spec.yarn_beta_slow = static_cast<float>(beta_slow);
  spec.attn_factor = static_cast<float>(attn_factor);
  // The pair index at which a pair makes n turns over the original context.
  const auto turns_dim = [&](double n) {
    return kRopeDim * std::log(orig_context / (n * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  const double low = std::max(0.0, std::floor(turns_dim(beta_fast)));
  const double high = std::min(kRopeDim - 1.0, std::ceil(turns_dim(beta_slow)));
  ASSERT_GT(low, 0);  // the parameters put the ramp inside the head: all three regimes occur
  ASSERT_LT(high, kRopeDim / 2 - 1);
  const double mscale = attn_factor * (1 + 0.1 * std::log(factor));
  for (int pos : {3, 50, 511}) {
    const std::vector<float> got = cos_sin(spec, pos);
    for (int i = 0; i < kRopeDim / 2; ++i) {
      const double extrapolated = unscaled_angle(base, pos, i);
      const double keep = 1 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double theta = extrapolated / factor * (1 - keep) + extrapolated * keep;
      // float angles of ~500 radians carry ~3e-5 of rounding
      EXPECT_NEAR(got[2 * i], std::cos(theta) * mscale, pos > 100 ? 2e-4 : 2e-5) << pos << " " << i;
      EXPECT_NEAR(got[2 * i + 1], std::sin(theta) * mscale, pos > 100 ? 2e-4 : 2e-5)
          << pos << " " << i;
    }
  }
}

TEST(Rope, NeoxRotatesHalvesAndNormalRotatesAdjacentPairs) {
  const int head_dim = 4, rope_dim = 4;
  const float cs[4] = {0.0f, 1.0f, 1.0f, 0.0f};  // pair 0 by 90 degrees, pair 1 by 0
  float normal[4] = {1, 2, 3, 4}, neox[4] = {1, 2, 3, 4};
  apply_rope(normal, 1, head_dim, rope_dim, false, cs);
  apply_rope(neox, 1, head_dim, rope_dim, true, cs);
  EXPECT_EQ(std::vector<float>(normal, normal + 4), (std::vector<float>{-2, 1, 3, 4}));
  EXPECT_EQ(std::vector<float>(neox, neox + 4), (std::vector<float>{-3, 2, 1, 4}));
}

namespace fs = std::filesystem;

// A copy of a shared GGUF with some metadata keys dropped and others set by `edit`.
std::string edited_gguf(const std::string& model, const std::set<std::string>& drop,
                        const std::function<void(GgufWriter&)>& edit) {
  const std::shared_ptr<GgufFile> f = GgufFile::open(testing::shared_path("models/" + model));
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) {
    if (!drop.contains(key)) w.set(key, value);
  }
  edit(w);
  for (const TensorView& t : f->tensors()) {
    w.add_tensor(t.name, t.type, {t.ne.begin(), t.ne.end()}, t.data, t.bytes);
  }
  const std::string path =
      (fs::temp_directory_path() / ("k25_rope_" + std::to_string(::getpid()) + ".gguf")).string();
  w.write(path);
  return path;
}

TEST(GgufRope, UnknownScalingTypeIsOneClearError) {
  K25_REQUIRE_SHARED();
  const std::string path =
      edited_gguf("random-llama-linear-rope.gguf", {"llama.rope.scaling.type"},
                  [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "longrope"); });
  try {
    load_gguf_model(path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unsupported RoPE scaling type 'longrope'"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  fs::remove(path);
}

TEST(GgufRope, ReadsYarnLinearAndLlama3Scaling) {
  K25_REQUIRE_SHARED();
  const std::string path =
      edited_gguf("random-llama-linear-rope.gguf", {"llama.rope.scaling.type"}, [](GgufWriter& w) {
        w.set_string("llama.rope.scaling.type", "yarn");
        w.set_u32("llama.rope.scaling.original_context_length", 1024);
        w.set_f32("llama.rope.scaling.attn_factor", 1.5f);
      });
  const RopeSpec yarn = load_gguf_model(path).config.layers.at(1).rope;
  fs::remove(path);
  EXPECT_TRUE(yarn.yarn);
  EXPECT_EQ(yarn.freq_scale, 0.25f);
  EXPECT_EQ(yarn.yarn_orig_context, 1024);
  EXPECT_EQ(yarn.yarn_beta_fast, 32.0f);
  EXPECT_EQ(yarn.yarn_beta_slow, 1.0f);
  EXPECT_EQ(yarn.attn_factor, 1.5f);

  const RopeSpec linear =
      load_gguf_model(testing::shared_path("models/random-llama-linear-rope.gguf"))
          .config.layers.at(0)
          .rope;
  EXPECT_FALSE(linear.yarn);
  EXPECT_EQ(linear.freq_scale, 0.25f);
  EXPECT_TRUE(linear.freq_factors.empty());

  const RopeSpec llama3 =
      load_gguf_model(testing::shared_path("models/random-llama3-rope.gguf")).config.layers[0].rope;
  EXPECT_EQ(llama3.freq_scale, 1.0f);
  ASSERT_EQ(llama3.freq_factors.size(), 32u);
  EXPECT_EQ(llama3.freq_factors[0], 1.0f);
  EXPECT_NEAR(llama3.freq_factors[15], 1.5534146f, 1e-6);
  EXPECT_EQ(llama3.freq_factors[31], 8.0f);
}

// Hugging Face's llama3 rope_scaling gives the factors llama.cpp's converter stored in the GGUF.
TEST(HfRope, Llama3ScalingGivesTheGgufFactors) {
  K25_REQUIRE_SHARED();
  const nlohmann::json scaling = {{"rope_type", "llama3"},
                                  {"factor", 8.0},
                                  {"low_freq_factor", 1.0},
                                  {"high_freq_factor", 4.0},
                                  {"original_max_position_embeddings", 8192}};
  const RopeSpec hf = hf_rope_spec(scaling, 500000.0f, 64, 131072, "config.json");
  const RopeSpec gguf =
      load_gguf_model(testing::shared_path("models/random-llama3-rope.gguf")).config.layers[0].rope;
  ASSERT_EQ(hf.freq_factors.size(), gguf.freq_factors.size());
  for (size_t i = 0; i < hf.freq_factors.size(); ++i) {
    EXPECT_NEAR(hf.freq_factors[i], gguf.freq_factors[i], 1e-6f * gguf.freq_factors[i]) << i;
  }
  EXPECT_EQ(hf.freq_scale, 1.0f);
}

TEST(HfRope, LinearYarnAndUnknownTypes) {
  // The older "type" spelling.
  const RopeSpec linear =
      hf_rope_spec({{"type", "linear"}, {"factor", 4.0}}, 10000.0f, 64, 2048, "config.json");
  EXPECT_EQ(linear.freq_scale, 0.25f);
  EXPECT_FALSE(linear.yarn);
  EXPECT_EQ(hf_rope_spec(nullptr, 10000.0f, 64, 2048, "config.json").freq_scale, 1.0f);

  const RopeSpec yarn = hf_rope_spec({{"rope_type", "yarn"},
                                      {"factor", 4.0},
                                      {"original_max_position_embeddings", 32768},
                                      {"beta_fast", 16.0}},
                                     1e6f, 64, 131072, "config.json");
  EXPECT_TRUE(yarn.yarn);
  EXPECT_EQ(yarn.freq_scale, 0.25f);
  EXPECT_EQ(yarn.yarn_orig_context, 32768);
  EXPECT_EQ(yarn.yarn_beta_fast, 16.0f);
  EXPECT_EQ(yarn.yarn_beta_slow, 1.0f);
  EXPECT_EQ(yarn.attn_factor, 1.0f);  // the default: Rope applies 1 + 0.1 ln(factor) itself
  // An explicit attention_factor is the whole multiplier.
  const RopeSpec explicit_factor = hf_rope_spec(
      {{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 1.5}}, 1e6f, 64, 4096, "c");
  EXPECT_NEAR(explicit_factor.attn_factor * (1 + 0.1 * std::log(4.0)), 1.5, 1e-6);

  try {
    hf_rope_spec({{"rope_type", "longrope"}, {"factor", 4.0}}, 1e4f, 64, 4096, "dir/config.json");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported RoPE scaling type 'longrope'"),
              std::string::npos)
        << e.what();
  }
}

TEST(GgufArchitectures, Qwen3AndGemma3Shapes) {
  K25_REQUIRE_SHARED();
  const ModelConfig qwen3 =
      load_gguf_model(testing::shared_path("models/random-qwen3.gguf")).config;
  EXPECT_EQ(qwen3.arch, Arch::Qwen3);
  EXPECT_EQ(qwen3.head_dim, 64);  // from key_length, not 128 / 4
  EXPECT_TRUE(qwen3.rope_neox);
  const LoadedModel gemma3 = load_gguf_model(testing::shared_path("models/random-gemma3.gguf"));
  const ModelConfig& g = gemma3.config;
  EXPECT_EQ(g.arch, Arch::Gemma3);
  EXPECT_EQ(g.embedding_scale, 16.0f);
  EXPECT_EQ(g.ffn_activation, FfnActivation::kGeluF16);
  ASSERT_EQ(g.layers.size(), 2u);
  EXPECT_EQ(g.layers[0].sliding_window, 32);  // pattern 2: block 0 local, block 1 global
  EXPECT_EQ(g.layers[0].rope.base, 10000.0f);
  EXPECT_EQ(g.layers[1].sliding_window, 0);
  EXPECT_EQ(g.layers[1].rope.base, 1e6f);
  EXPECT_EQ(gemma3.weights.layers[1].ffn_post_norm.size(), 256u);
  EXPECT_EQ(gemma3.weights.layers[1].q_norm.size(), 64u);

  // Without the pattern key llama.cpp assumes 6: layers 0-4 of every 6 are local.
  const std::string path = edited_gguf(
      "random-gemma3.gguf", {"gemma3.attention.sliding_window_pattern"}, [](GgufWriter&) {});
  const ModelConfig six = load_gguf_model(path).config;
  fs::remove(path);
  EXPECT_EQ(six.layers[0].sliding_window, 32);
  EXPECT_EQ(six.layers[1].sliding_window, 32);
}

}  // namespace
}  // namespace k25
