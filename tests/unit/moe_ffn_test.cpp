#include "model/moe_ffn.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "kernels/repack.h"
#include "model/model.h"
#include "model/weights.h"
#include "random_weights.h"
#include "test_paths.h"

namespace k25 {
namespace {

using testing::make_weights;
using testing::shared_path;
using testing::Weights;

TEST(MoeRouting, SoftmaxTopKRenormalised) {
  // Token 0: probabilities 0.1, 0.2, 0.3, 0.4: top 2 are experts 3 and 2, weights 4/7 and 3/7.
  // Token 1: experts 1 and 3 tie for first: the lower id ranks first; both get 1/2.
  const std::vector<float> logits = {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f),
                                     1.0f,           3.0f,           2.0f,           3.0f};
  std::vector<ExpertChoice> c(4);
  route_top_k(logits.data(), 2, 4, 2, c.data());
  EXPECT_EQ(c[0].expert, 3);
  EXPECT_EQ(c[1].expert, 2);
  EXPECT_NEAR(c[0].weight, 4.0f / 7.0f, 1e-6f);
  EXPECT_NEAR(c[1].weight, 3.0f / 7.0f, 1e-6f);
  EXPECT_EQ(c[2].expert, 1);
  EXPECT_EQ(c[3].expert, 3);
  EXPECT_FLOAT_EQ(c[2].weight, 0.5f);
  EXPECT_FLOAT_EQ(c[3].weight, 0.5f);
}

TEST(MoeRouting, OneExpertGetsWeightOneAndAllExpertsKeepTheSoftmax) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f};
  std::vector<ExpertChoice> one(1), all(3);
  route_top_k(logits.data(), 1, 3, 1, one.data());
  EXPECT_EQ(one[0].expert, 2);
  EXPECT_EQ(one[0].weight, 1.0f);
  route_top_k(logits.data(), 1, 3, 3, all.data());
  const double sum = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);
  EXPECT_EQ(all[0].expert, 2);
  EXPECT_EQ(all[1].expert, 0);
  EXPECT_EQ(all[2].expert, 1);
  EXPECT_NEAR(all[0].weight, std::exp(2.0) / sum, 1e-6);
  EXPECT_NEAR(all[1].weight, std::exp(0.5) / sum, 1e-6);
  EXPECT_NEAR(all[2].weight, std::exp(-1.0) / sum, 1e-6);
}

TEST(MoeRouting, RejectsMoreExpertsPerTokenThanExperts) {
  const std::vector<float> logits(4, 0.0f);
  std::vector<ExpertChoice> c(5);
  EXPECT_THROW(route_top_k(logits.data(), 1, 4, 5, c.data()), Error);
  EXPECT_THROW(route_top_k(logits.data(), 1, 4, 0, c.data()), Error);
}

// Random experts as the GGUF files store them: 3-D tensors with the expert in ne2.
struct RandomMoe {
  int dim, ffn, n_experts;
  Weights router, gate, up, down;  // gate/up/down hold all experts' rows
  MoeWeights w;
};

Weights expert_tensor(DType type, int rows, int cols, int n_experts, std::mt19937& rng) {
  Weights t = make_weights(type, int64_t{rows} * n_experts, cols, rng);
  t.view.n_dims = 3;
  t.view.ne = {cols, rows, n_experts, 1};
  return t;
}

RandomMoe make_moe(DType type, int dim, int ffn, int n_experts, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomMoe m{dim,
              ffn,
              n_experts,
              make_weights(DType::F32, n_experts, dim, rng),
              expert_tensor(type, ffn, dim, n_experts, rng),
              expert_tensor(type, ffn, dim, n_experts, rng),
              expert_tensor(type, dim, ffn, n_experts, rng),
              {}};
  m.w.router = m.router.view;
  for (int e = 0; e < n_experts; ++e) {
    m.w.gate.push_back(expert_matrix(m.gate.view, e));
    m.w.up.push_back(expert_matrix(m.up.view, e));
    m.w.down.push_back(expert_matrix(m.down.view, e));
  }
  return m;
}

std::vector<float> random_rows(int n_tokens, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.3f);
  std::vector<float> x(static_cast<size_t>(n_tokens) * dim);
  for (float& v : x) v = g(rng);
  return x;
}

// What a matmul over quantised weights multiplies: the activations after a Q8_0 round trip.
std::vector<float> as_multiplied(DType weight_type, std::vector<float> v) {
  if (weight_type != DType::Q8_0) return v;
  std::vector<uint8_t> q(row_bytes(DType::Q8_0, static_cast<int64_t>(v.size())));
  quantize_row(DType::Q8_0, v.data(), q.data(), static_cast<int64_t>(v.size()));
  dequantize_row(DType::Q8_0, q.data(), v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// The block token by token in double over the dequantised weights: softmax, top k by sorting,
// each chosen expert's SwiGLU, weighted sum.
std::vector<double> naive_moe(const RandomMoe& m, int k, const float* x_in) {
  const int E = m.n_experts, dim = m.dim, ffn = m.ffn;
  const DType type = m.gate.view.type;
  const std::vector<float> x = as_multiplied(type, std::vector<float>(x_in, x_in + dim));
  std::vector<double> p(E);
  double sum = 0.0;
  for (int e = 0; e < E; ++e) {
    double l = 0.0;
    for (int c = 0; c < dim; ++c) l += double{m.router.dequantised[e * dim + c]} * x_in[c];
    p[e] = std::exp(l);
    sum += p[e];
  }
  std::vector<int> order(E);
  for (int e = 0; e < E; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double chosen = 0.0;
  for (int r = 0; r < k; ++r) chosen += p[order[r]] / sum;
  std::vector<double> out(dim, 0.0);
  std::vector<float> h(ffn);
  for (int r = 0; r < k; ++r) {
    const int e = order[r];
    const float* g = m.gate.dequantised.data() + static_cast<size_t>(e) * ffn * dim;
    const float* u = m.up.dequantised.data() + static_cast<size_t>(e) * ffn * dim;
    const float* d = m.down.dequantised.data() + static_cast<size_t>(e) * dim * ffn;
    for (int j = 0; j < ffn; ++j) {
      double gs = 0.0, us = 0.0;
      for (int c = 0; c < dim; ++c) {
        gs += double{g[j * dim + c]} * x[c];
        us += double{u[j * dim + c]} * x[c];
      }
      h[j] = static_cast<float>(gs / (1.0 + std::exp(-gs)) * us);
    }
    h = as_multiplied(type, h);
    const double weight = p[e] / sum / chosen;
    for (int i = 0; i < dim; ++i) {
      double y = 0.0;
      for (int j = 0; j < ffn; ++j) y += double{d[i * ffn + j]} * h[j];
      out[i] += weight * y;
    }
  }
  return out;
}

TEST(MoeFfn, ExpertMatrixIsTheExpertsRows) {
  std::mt19937 rng(1);
  const Weights t = expert_tensor(DType::Q8_0, 3, 64, 4, rng);
  const TensorView m = expert_matrix(t.view, 2);
  EXPECT_EQ(m.row_length(), 64);
  EXPECT_EQ(m.n_rows(), 3);
  EXPECT_EQ(m.bytes, 3 * row_bytes(DType::Q8_0, 64));
  EXPECT_EQ(m.data, t.bytes.data() + 6 * row_bytes(DType::Q8_0, 64));
}

// Batches of 1 (decode), a few and many tokens, on one thread and on three with each schedule,
// against the per-token loop in double.
TEST(MoeFfn, BatchedExpertsEqualPerTokenLoop) {
  ThreadPool one(1), three(3);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    const RandomMoe m = make_moe(type, 64, 96, 8, 7);
    for (int k : {1, 2, 3}) {
      for (int n : {1, 2, 7, 33}) {
        const std::vector<float> x = random_rows(n, m.dim, 100 + n);
        for (auto [pool, schedule] : {std::pair{&one, MoeSchedule::kAuto},
                                      {&three, MoeSchedule::kAuto},
                                      {&three, MoeSchedule::kExpertPerThread},
                                      {&three, MoeSchedule::kSplitMatmuls}}) {
          MoeFfn moe;
          moe.set_schedule(schedule);
          std::vector<float> out(x.size(), NAN);
          moe.forward(m.w, k, x.data(), n, out.data(), *pool);
          for (int t = 0; t < n; ++t) {
            const std::vector<double> ref = naive_moe(m, k, x.data() + t * m.dim);
            double mag = 0.0;
            for (double v : ref) mag = std::max(mag, std::fabs(v));
            // With Q8_0, an activation next to a rounding boundary may round the other way.
            const double tol = (type == DType::Q8_0 ? 1e-3 : 1e-4) * mag;
            for (int i = 0; i < m.dim; ++i) {
              ASSERT_NEAR(out[t * m.dim + i], ref[i], tol)
                  << dtype_name(type) << " k " << k << " batch " << n << " threads " << pool->size()
                  << " token " << t << " element " << i;
            }
          }
        }
      }
    }
  }
}

// Q8_0 experts are repacked at load like any matmul weight where the kernel set repacks (and
// left as they are elsewhere), and the block gives the same results from the repacked copies.
TEST(MoeFfn, ExpertsAreRepackedWithTheOtherWeights) {
  const RandomMoe m = make_moe(DType::Q8_0, 64, 96, 4, 3);
  LoadedModel loaded;
  loaded.weights.layers.resize(1);
  loaded.weights.layers[0].moe = m.w;
  repack_matmul_weights(loaded, /*release_mapped_source=*/false);
  const MoeWeights& packed = loaded.weights.layers[0].moe;
  for (int e = 0; e < m.n_experts; ++e) {
    const bool repacks = repack_supported(DType::Q8_0);
    EXPECT_EQ(packed.gate[e].packed != nullptr, repacks);
    EXPECT_EQ(packed.up[e].packed != nullptr, repacks);
    EXPECT_EQ(packed.down[e].packed != nullptr, repacks);
  }
  ThreadPool pool(2);
  const std::vector<float> x = random_rows(5, m.dim, 9);
  std::vector<float> plain(x.size()), repacked(x.size());
  MoeFfn moe;
  moe.forward(m.w, 2, x.data(), 5, plain.data(), pool);
  moe.forward(packed, 2, x.data(), 5, repacked.data(), pool);
  float mag = 0.0f;
  for (float v : plain) mag = std::max(mag, std::fabs(v));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(repacked[i], plain[i], 1e-4f * mag) << i;
}

// A token's output is bitwise the same alone (decode) and inside a batch of 7 where its
// experts see several rows, whichever schedule runs; out may be the input buffer.

TEST(MoeFfn, TokenResultDoesNotDependOnTheBatch) {
  ThreadPool one(1), two(2);
  for (DType type : {DType::F32, DType::F16}) {
    const RandomMoe m = make_moe(type, 64, 96, 4, 11);
    const std::vector<float> x = random_rows(7, m.dim, 5);
    std::vector<float> reference;  // the first configuration's batch
    for (auto [pool, schedule] : {std::pair{&one, MoeSchedule::kAuto},
                                  {&two, MoeSchedule::kExpertPerThread},
                                  {&two, MoeSchedule::kSplitMatmuls}}) {
      MoeFfn moe;
      moe.set_schedule(schedule);
      std::vector<float> batch(x);
      moe.forward(m.w, 2, batch.data(), 7, batch.data(), *pool);
      if (reference.empty()) reference = batch;
      for (int t = 0; t < 7; ++t) {
        std::vector<float> alone(x.begin() + t * m.dim, x.begin() + (t + 1) * m.dim);
        moe.forward(m.w, 2, alone.data(), 1, alone.data(), *pool);
        for (int i = 0; i < m.dim; ++i) {
          ASSERT_EQ(alone[i], reference[t * m.dim + i])
              << dtype_name(type) << " threads " << pool->size() << " schedule "
              << static_cast<int>(schedule) << " token " << t << " element " << i;
          ASSERT_EQ(batch[t * m.dim + i], reference[t * m.dim + i]);
        }
      }
    }
  }
}

// random-qwen3moe.gguf rewritten with a metadata key set or dropped, a tensor dropped, or an
// expert tensor cut to its first experts; returns the error line of loading it ("" if it loads).
struct Edit {
  std::string key;
  int64_t value = 0;
  std::string dropped_key, dropped_tensor, cut_tensor;
  int64_t cut_to_experts = 0;
};
Edit set_key(std::string key, int64_t value) {
  Edit e;
  e.key = std::move(key);
  e.value = value;
  return e;
}
Edit drop_key(std::string key) {
  Edit e;
  e.dropped_key = std::move(key);
  return e;
}
Edit drop_tensor(std::string name) {
  Edit e;
  e.dropped_tensor = std::move(name);
  return e;
}
Edit cut_experts(std::string name, int64_t n_experts) {
  Edit e;
  e.cut_tensor = std::move(name);
  e.cut_to_experts = n_experts;
  return e;
}

std::string load_error(const Edit& edit) {
  const auto f = GgufFile::open(shared_path("models/random-qwen3moe.gguf"));
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) {
    if (key == edit.dropped_key) continue;
    if (key == edit.key) {
      w.set_u32(key, static_cast<uint32_t>(edit.value));
    } else {
      w.set(key, value);
    }
  }
  for (const TensorView& t : f->tensors()) {
    if (t.name == edit.dropped_tensor) continue;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    size_t bytes = t.bytes;
    if (t.name == edit.cut_tensor) {
      bytes = bytes / static_cast<size_t>(ne[2]) * static_cast<size_t>(edit.cut_to_experts);
      ne[2] = edit.cut_to_experts;
    }
    w.add_tensor(t.name, t.type, ne, t.data, bytes);
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / ("k25_moe_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  w.write(path);
  std::string message;
  try {
    load_gguf_model(path);
  } catch (const Error& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  return message;
}

TEST(MoeLoader, ReadsTheExpertConfig) {
  K25_REQUIRE_SHARED();
  const LoadedModel m = load_gguf_model(shared_path("models/random-qwen3moe.gguf"));
  EXPECT_EQ(m.config.n_experts, 8);
  EXPECT_EQ(m.config.n_experts_used, 2);
  EXPECT_EQ(m.config.expert_ffn_dim, 64);
  ASSERT_EQ(m.weights.layers.size(), 2u);
  for (const LayerWeights& L : m.weights.layers) {
    ASSERT_EQ(L.moe.n_experts(), 8);
    EXPECT_EQ(L.moe.router.n_rows(), 8);
    EXPECT_EQ(L.moe.gate[7].n_rows(), 64);
    EXPECT_EQ(L.moe.down[7].n_rows(), 128);
    EXPECT_TRUE(L.w_gate.empty());
  }
}

TEST(MoeLoader, ExpertCountDisagreeingWithTheTensorsIsOneClearError) {
  K25_REQUIRE_SHARED();
  const std::string metadata = load_error(set_key("qwen3moe.expert_count", 7));
  EXPECT_NE(metadata.find("'blk.0.ffn_gate_inp.weight' has 8 experts"), std::string::npos)
      << metadata;
  EXPECT_NE(metadata.find("qwen3moe.expert_count is 7"), std::string::npos) << metadata;
  const std::string tensor = load_error(cut_experts("blk.1.ffn_up_exps.weight", 7));
  EXPECT_NE(tensor.find("'blk.1.ffn_up_exps.weight' has 7 experts (ne2)"), std::string::npos)
      << tensor;
  EXPECT_NE(tensor.find("qwen3moe.expert_count is 8"), std::string::npos) << tensor;
  EXPECT_EQ(tensor.find('\n'), std::string::npos);
}

TEST(MoeLoader, MoreExpertsPerTokenThanExpertsIsAnError) {
  K25_REQUIRE_SHARED();
  const std::string e = load_error(set_key("qwen3moe.expert_used_count", 9));
  EXPECT_NE(e.find("inconsistent mixture of experts"), std::string::npos) << e;
  EXPECT_NE(e.find("expert_used_count 9"), std::string::npos) << e;
}

TEST(MoeLoader, MissingRouterOrKeyIsNamed) {
  K25_REQUIRE_SHARED();
  EXPECT_EQ(load_error(Edit()), "");  // the rewrite itself loads
  const std::string router = load_error(drop_tensor("blk.1.ffn_gate_inp.weight"));
  EXPECT_NE(router.find("missing tensor 'blk.1.ffn_gate_inp.weight'"), std::string::npos) << router;
  const std::string key = load_error(drop_key("qwen3moe.expert_feed_forward_length"));
  EXPECT_NE(key.find("qwen3moe.expert_feed_forward_length"), std::string::npos) << key;
}

// The whole model: a prompt's logits alone and with another sequence's tokens interleaved in the
// same batch (so each expert's rows come from both) are bitwise equal (F16 experts).
TEST(MoeModel, SequenceLogitsDoNotDependOnTheBatch) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(shared_path("models/random-qwen3moe.gguf"));
  ThreadPool pool(2);
  const int n_vocab = model->config().n_vocab;
  const auto a = model->tokenizer().encode("Hello world, this is a test", true, false);
  const auto b = model->tokenizer().encode("def f(x): return x * 2  # twice", true, false);
  const auto alone = [&](const std::vector<TokenId>& ids) {
    auto kv = model->make_kv_cache();
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) batch.push_back({ids[i], static_cast<int>(i), 0, true});
    std::vector<float> logits(ids.size() * n_vocab);
    model->forward(batch, *kv, logits.data(), pool);
    return logits;
  };
  const std::vector<float> la = alone(a);
  auto kv = model->make_kv_cache();
  std::vector<BatchToken> mixed;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) mixed.push_back({a[i], static_cast<int>(i), 0, true});
    if (i < b.size()) mixed.push_back({b[i], static_cast<int>(i), 1, false});
  }
  std::vector<float> both(a.size() * n_vocab);
  model->forward(mixed, *kv, both.data(), pool);
  for (size_t i = 0; i < la.size(); ++i) ASSERT_EQ(both[i], la[i]) << "logit " << i;
}

}  // namespace
}  // namespace k25
