// The mixture-of-experts FFN block on a Qwen3-30B-A3B layer shape (dim 2048, 768 per expert, 8 of
// 64 experts per token; the real model has 128, halved to fit beside other work in memory) with
// Q8_0 experts, for each thread schedule. Decode (1 token) and batched decode (8) are memory
// bound: active_GB/s counts the bytes of the distinct experts the batch reads. Prefill (512)
// counts tokens per second.
//   build/bin/moe_bench --benchmark_filter=Moe
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/thread_pool.h"
#include "kernels/quant.h"
#include "model/moe_ffn.h"

namespace k25 {
namespace {

constexpr int kDim = 2048, kExpertFfn = 768, kExperts = 64, kUsed = 8;

using bench::next_random;
using bench::pool_of;

float random_unit(uint64_t& s) {
  return static_cast<float>(static_cast<int64_t>(next_random(s) % 2001) - 1000) / 1000.0f;
}

// Random Q8_0 blocks with a fixed small scale (the kernels' speed does not depend on the values).
std::vector<uint8_t> random_q8_0(int64_t rows, int64_t cols, uint64_t& s) {
  const size_t bytes = row_bytes(DType::Q8_0, cols) * rows;
  std::vector<uint8_t> data(bytes);
  for (size_t j = 0; j + 8 <= bytes; j += 8) {
    const uint64_t r = next_random(s);
    std::memcpy(data.data() + j, &r, 8);
  }
  const uint16_t scale = f32_to_f16(0.01f);
  for (size_t b = 0; b < bytes / sizeof(BlockQ8_0); ++b) {
    std::memcpy(data.data() + b * sizeof(BlockQ8_0), &scale, 2);
  }
  return data;
}

TensorView view(const std::string& name, DType type, std::array<int64_t, 4> ne,
                const std::vector<uint8_t>& data) {
  TensorView v;
  v.name = name;
  v.type = type;
  v.n_dims = ne[2] > 1 ? 3 : 2;
  v.ne = ne;
  v.data = data.data();
  v.bytes = data.size();
  return v;
}

struct Layer {
  std::vector<uint8_t> router, gate, up, down;
  MoeWeights w;
};

const Layer& layer() {
  static const Layer l = [] {
    Layer m;
    uint64_t s = 0x9e3779b97f4a7c15ull;
    m.router.resize(sizeof(float) * kDim * kExperts);
    auto* r = reinterpret_cast<float*>(m.router.data());
    for (int i = 0; i < kDim * kExperts; ++i) r[i] = random_unit(s);
    m.gate = random_q8_0(int64_t{kExpertFfn} * kExperts, kDim, s);
    m.up = random_q8_0(int64_t{kExpertFfn} * kExperts, kDim, s);
    m.down = random_q8_0(int64_t{kDim} * kExperts, kExpertFfn, s);
    m.w.router = view("router", DType::F32, {kDim, kExperts, 1, 1}, m.router);
    const TensorView gate = view("gate", DType::Q8_0, {kDim, kExpertFfn, kExperts, 1}, m.gate);
    const TensorView up = view("up", DType::Q8_0, {kDim, kExpertFfn, kExperts, 1}, m.up);
    const TensorView down = view("down", DType::Q8_0, {kExpertFfn, kDim, kExperts, 1}, m.down);
    for (int e = 0; e < kExperts; ++e) {
      m.w.gate.push_back(expert_matrix(gate, e));
      m.w.up.push_back(expert_matrix(up, e));
      m.w.down.push_back(expert_matrix(down, e));
    }
    return m;
  }();
  return l;
}

void BM_MoeFfn(benchmark::State& state, MoeSchedule schedule) {
  const int n_tokens = static_cast<int>(state.range(0));
  ThreadPool& pool = pool_of(static_cast<int>(state.range(1)));
  const Layer& l = layer();
  // Several input batches, so decode steps route to different experts as a real one does.
  constexpr int kInputs = 16;
  uint64_t s = 42;
  std::vector<std::vector<float>> inputs(kInputs, std::vector<float>(size_t{kDim} * n_tokens));
  for (auto& x : inputs) {
    for (float& v : x) v = random_unit(s);
  }
  std::vector<float> out(size_t{kDim} * n_tokens);
  MoeFfn moe;
  moe.set_schedule(schedule);
  // Bytes of the distinct experts each input batch reaches (router logits computed once here).
  std::vector<double> active_bytes(kInputs);
  const double expert_bytes =
      static_cast<double>(l.w.gate[0].bytes + l.w.up[0].bytes + l.w.down[0].bytes);
  for (int i = 0; i < kInputs; ++i) {
    std::vector<float> logits(size_t{kExperts} * n_tokens);
    for (int t = 0; t < n_tokens; ++t) {
      for (int e = 0; e < kExperts; ++e) {
        double sum = 0.0;
        const float* w = reinterpret_cast<const float*>(l.router.data()) + size_t{kDim} * e;
        for (int c = 0; c < kDim; ++c) sum += w[c] * inputs[i][size_t{kDim} * t + c];
        logits[size_t{kExperts} * t + e] = static_cast<float>(sum);
      }
    }
    std::vector<ExpertChoice> choices(size_t{kUsed} * n_tokens);
    route_top_k(logits.data(), n_tokens, kExperts, kUsed, choices.data());
    std::set<int> experts;
    for (const ExpertChoice& c : choices) experts.insert(c.expert);
    active_bytes[i] = expert_bytes * static_cast<double>(experts.size());
  }
  double bytes = 0.0;
  int i = 0;
  for (auto _ : state) {
    moe.forward(l.w, kUsed, inputs[i].data(), n_tokens, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
    bytes += active_bytes[i];
    i = (i + 1) % kInputs;
  }
  state.counters["active_GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * n_tokens, benchmark::Counter::kIsRate);
}

void moe_args(benchmark::internal::Benchmark* b) {
  for (int tokens : {1, 8, 512}) {
    for (int threads : {1, 2, 4, 8, 16}) {
      if (threads <= static_cast<int>(std::thread::hardware_concurrency())) {
        b->Args({tokens, threads});
      }
    }
  }
  b->ArgNames({"tokens", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_MoeFfn, auto, MoeSchedule::kAuto) -> Apply(moe_args);
BENCHMARK_CAPTURE(BM_MoeFfn, expert_per_thread, MoeSchedule::kExpertPerThread)->Apply(moe_args);
BENCHMARK_CAPTURE(BM_MoeFfn, split_matmuls, MoeSchedule::kSplitMatmuls)->Apply(moe_args);

}  // namespace
}  // namespace k25
BENCHMARK_MAIN();
