// Kernel throughput on TinyLlama-1.1B shapes. Decode (1 token) is memory bound: the counter
// weight_GB/s is weight bytes streamed per second (compare with k25-membw). Prefill (512
// tokens) is compute bound: GFLOP/s counts 2 * rows * cols * tokens.
//   build/bin/kernels_bench --benchmark_filter=Matmul
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "bench_util.h"
#include "core/cache_aligned.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/block_types.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "kv/page_pool.h"

namespace k25 {
namespace {

using bench::next_random;
using bench::pool_of;

// Random weight bytes with valid, small scales, repacked as a model's weights are at load where
// the kernel set repacks their type. Decode cycles through enough copies that the weights come
// from DRAM, not from the 32 MiB L3, as they do in a real model.
struct WeightSet {
  std::vector<std::vector<uint8_t>> copies;
  std::vector<TensorView> views;
  PackedWeights packed;  // owns views[i].packed
};

WeightSet make_weights(DType type, int64_t rows, int64_t cols, size_t min_total_bytes) {
  WeightSet set;
  const size_t bytes = row_bytes(type, cols) * rows;
  const size_t n_copies = std::max<size_t>(1, (min_total_bytes + bytes - 1) / bytes);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < n_copies; ++i) {
    std::vector<uint8_t> data(bytes);
    for (size_t j = 0; j + 8 <= bytes; j += 8) {
      const uint64_t r = next_random(s);
      std::memcpy(data.data() + j, &r, 8);
    }
    const size_t elem = dtype_block_bytes(type);
    const uint16_t scale = type == DType::BF16 ? f32_to_bf16(0.01f) : f32_to_f16(0.01f);
    if (type == DType::Q8_0 || type == DType::Q4_0) {
      for (size_t b = 0; b < bytes / elem; ++b) std::memcpy(data.data() + b * elem, &scale, 2);
      // Quantisers write Q8_0 quants in [-127, 127]; a -128 would send its group to the avx2
      // set's slower decode (kernels/repack.h), which real files never take.
      if (type == DType::Q8_0) std::replace(data.begin(), data.end(), uint8_t{0x80}, uint8_t{0x81});
    } else if (type != DType::F32) {
      for (size_t j = 0; j < bytes; j += 2) std::memcpy(data.data() + j, &scale, 2);
    } else {
      const float one = 0.01f;
      for (size_t j = 0; j < bytes; j += 4) std::memcpy(data.data() + j, &one, 4);
    }
    set.copies.push_back(std::move(data));
  }
  for (auto& c : set.copies) {
    TensorView v;
    v.name = "bench.weight";
    v.type = type;
    v.n_dims = 2;
    v.ne = {cols, rows, 1, 1};
    v.data = c.data();
    v.bytes = c.size();
    set.views.push_back(v);
  }
  if (repack_supported(type)) {
    std::vector<TensorView*> views;
    for (TensorView& v : set.views) views.push_back(&v);
    set.packed = repack_matrices(views, 2);
  }
  return set;
}

void run_matmul(benchmark::State& state, DType type, bool from_dram) {
  const int64_t rows = state.range(0);
  const int64_t cols = state.range(1);
  const int n_tokens = static_cast<int>(state.range(2));
  const int n_threads = static_cast<int>(state.range(3));
  const WeightSet w = make_weights(type, rows, cols, from_dram ? (256u << 20) : 0);
  std::vector<float> x(static_cast<size_t>(n_tokens) * cols);
  uint64_t s = 12345;
  for (auto& v : x)
    v = static_cast<float>(static_cast<int64_t>(next_random(s) % 2001) - 1000) / 1000.0f;
  std::vector<float> y(static_cast<size_t>(n_tokens) * rows);
  ThreadPool& pool = pool_of(n_threads);
  size_t i = 0;
  for (auto _ : state) {
    matmul(w.views[i], x.data(), n_tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
    i = (i + 1) % w.views.size();
  }
  const double iters = static_cast<double>(state.iterations());
  if (n_tokens == 1) {
    state.counters["weight_GB/s"] = benchmark::Counter(
        iters * static_cast<double>(w.views[0].bytes) / 1e9, benchmark::Counter::kIsRate);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      iters * 2.0 * static_cast<double>(rows * cols) * n_tokens / 1e9, benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state, DType type) {
  run_matmul(state, type, state.range(2) == 1);
}

void matmul_args(benchmark::internal::Benchmark* b) {
  for (int tokens : {1, 16, 512}) {
    for (int threads : {1, 2}) {
      for (auto [rows, cols] :
           {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}, {32000, 2048}}) {
        if (tokens > 1 && rows == 32000) continue;  // output matmul runs for the last token only
        b->Args({rows, cols, tokens, threads});
      }
    }
  }
  b->ArgNames({"rows", "cols", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Matmul, q8_0, DType::Q8_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q4_0, DType::Q4_0)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q4_k, DType::Q4_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q5_k, DType::Q5_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q6_k, DType::Q6_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q3_k, DType::Q3_K)->Apply(matmul_args);
BENCHMARK_CAPTURE(BM_Matmul, q2_k, DType::Q2_K)->Apply(matmul_args);
// Decode on a matrix that stays in the 1 MiB L2 (one copy, 256 x 2048): the kernels' compute
// rate (weight_GB/s). At 2 threads decode streams at the memory bandwidth only if each thread's
// compute rate is well above its half of it.
void in_cache_args(benchmark::internal::Benchmark* b) {
  b->Args({256, 2048, 1, 1});
  b->ArgNames({"rows", "cols", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void BM_MatmulInCache(benchmark::State& state, DType type) {
  run_matmul(state, type, false);
}
BENCHMARK_CAPTURE(BM_MatmulInCache, q8_0, DType::Q8_0)->Apply(in_cache_args);
BENCHMARK_CAPTURE(BM_MatmulInCache, q4_0, DType::Q4_0)->Apply(in_cache_args);
BENCHMARK_CAPTURE(BM_MatmulInCache, q4_k, DType::Q4_K)->Apply(in_cache_args);
BENCHMARK_CAPTURE(BM_MatmulInCache, q5_k, DType::Q5_K)->Apply(in_cache_args);
BENCHMARK_CAPTURE(BM_MatmulInCache, q6_k, DType::Q6_K)->Apply(in_cache_args);

// The types of kernels/block_types.h: decode on the TinyLlama shapes, and one prefill.
void block_type_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (auto [rows, cols] :
         {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}}) {
      b->Args({rows, cols, 1, threads});
    }
  }
  b->Args({2048, 2048, 512, 1});
  b->ArgNames({"rows", "cols", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Matmul, q4_1, DType::Q4_1)->Apply(block_type_args);
BENCHMARK_CAPTURE(BM_Matmul, q5_0, DType::Q5_0)->Apply(block_type_args);
BENCHMARK_CAPTURE(BM_Matmul, q5_1, DType::Q5_1)->Apply(block_type_args);
BENCHMARK_CAPTURE(BM_Matmul, iq4_nl, DType::IQ4_NL)->Apply(block_type_args);
BENCHMARK_CAPTURE(BM_Matmul, iq4_xs, DType::IQ4_XS)->Apply(block_type_args);
BENCHMARK_CAPTURE(BM_Matmul, f16, DType::F16)
    ->Args({2048, 2048, 1, 1})
    ->Args({2048, 2048, 512, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Matmul, f32, DType::F32)
    ->Args({2048, 2048, 1, 1})
    ->Args({2048, 2048, 512, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The K-quant row dot alone on a 2048-element row that stays in L1: the compute rate of the
// decode kernel (weight_GB/s), which must exceed the memory bandwidth for decode to be memory
// bound.
void BM_KQuantVecDot(benchmark::State& state, DType type) {
  const int64_t n = 2048;
  const WeightSet w = make_weights(type, 1, n, 0);
  const BlockTypeKernels* k = block_type_kernels(type);
  std::vector<float> x(n, 0.5f);
  std::vector<uint8_t> a(act_row_bytes(k->act, n));
  quantize_acts(k->act, x.data(), a.data(), n);
  for (auto _ : state) benchmark::DoNotOptimize(k->vec_dot(w.copies[0].data(), a.data(), n));
  state.counters["weight_GB/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * w.copies[0].size() / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_KQuantVecDot, q2_k, DType::Q2_K);
BENCHMARK_CAPTURE(BM_KQuantVecDot, q3_k, DType::Q3_K);
BENCHMARK_CAPTURE(BM_KQuantVecDot, q4_k, DType::Q4_K);
BENCHMARK_CAPTURE(BM_KQuantVecDot, q5_k, DType::Q5_K);
BENCHMARK_CAPTURE(BM_KQuantVecDot, q6_k, DType::Q6_K);

// An activation row of 2048 quantised to Q8_K, as every K-quant matmul does on one thread.
void BM_QuantizeQ8K(benchmark::State& state) {
  const int64_t n = 2048;
  std::vector<float> x(n);
  uint64_t s = 99;
  for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(next_random(s) % 2001) - 1000);
  std::vector<uint8_t> a(act_row_bytes(ActFormat::kQ8_K, n));
  for (auto _ : state) {
    quantize_acts(ActFormat::kQ8_K, x.data(), a.data(), n);
    benchmark::DoNotOptimize(a.data());
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_QuantizeQ8K);

void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool& pool = pool_of(static_cast<int>(state.range(0)));
  std::vector<int> sink(pool.size() * 16);
  for (auto _ : state) {
    pool.run([&](int i) { sink[i * 16] += 1; });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ThreadPoolRun)->Arg(1)->Arg(2)->UseRealTime();

void BM_DotF32(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(n, 0.5f), b(n, 0.25f);
  for (auto _ : state) benchmark::DoNotOptimize(dot_f32(a.data(), b.data(), n));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_DotF32)->Arg(64)->Arg(128)->Arg(2048);

void BM_Axpy(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(n, 0.5f), b(n, 0.25f);
  for (auto _ : state) {
    axpy(a.data(), 1e-3f, b.data(), n);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Axpy)->Arg(64)->Arg(128);

void BM_Softmax(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> x(n);
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 13);
    softmax(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Softmax)->Arg(4096);

void BM_SiluMul(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> a(n, 0.5f), b(n, 1.0f);
  for (auto _ : state) {
    silu_mul(a.data(), b.data(), n);
    benchmark::DoNotOptimize(a.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SiluMul)->Arg(5632);

constexpr int kAttendHeadDim = 64;

// n_queries queries of one KV head (head size 64) over n_pos cached positions in `spans` (value
// rows kv_stride elements apart, keys in the caches' tiles of 16): the attention call timed, with
// its arithmetic as FLOP/s (2 multiply-adds per position and dimension: scores and weighted
// values).
void run_attention(benchmark::State& state, const std::vector<KvSpan>& spans, int kv_stride,
                   int n_pos, int n_queries, KvDtype dtype = KvDtype::kF32) {
  std::vector<float> q(static_cast<size_t>(n_queries) * kAttendHeadDim, 0.1f), out(q.size());
  std::vector<AttentionQuery> queries;
  for (int i = 0; i < n_queries; ++i) {
    queries.push_back({q.data() + i * kAttendHeadDim, n_pos, out.data() + i * kAttendHeadDim});
  }
  std::vector<float> scratch;
  for (auto _ : state) {
    attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                   kv_stride, kAttendHeadDim, 0.125f, scratch, dtype);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n_queries * n_pos);
  state.counters["FLOP/s"] = benchmark::Counter(
      4.0 * kAttendHeadDim * n_queries * n_pos * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// One KV head with range(1) queries at range(0) cached positions in one contiguous span, rows 1
// KiB apart (which alias in the caches: BM_AttendPaged reads the pool's layout): range(1) = 8 is
// one token of TinyLlama (8 query heads per KV head), 48 a prefill task of 16 tokens of the 125M
// shape (3 query heads per KV head).
void BM_AttendQueries(benchmark::State& state) {
  const int n_pos = static_cast<int>(state.range(0));
  constexpr int kKvStride = 256;
  std::vector<float> kv(static_cast<size_t>(n_pos) * kKvStride, 0.01f);
  run_attention(state, {{kv.data(), kv.data() + kAttendHeadDim, n_pos, kKeyTile}}, kKvStride, n_pos,
                static_cast<int>(state.range(1)));
}
BENCHMARK(BM_AttendQueries)
    ->Args({64, 8})
    ->Args({512, 8})
    ->Args({2048, 8})
    ->Args({2048, 3})
    ->Args({2048, 48});

// The same over the KV pool's layout: pages of 16 positions, each page's K rows (range(2)
// elements apart, the model's kv_dim) then its V rows, pages one after another, rows of f32
// (range(3) = 0, k25-run's default) or f16 (1, k25-server's). Attention visits them as spans of
// 16 rows; range(2) = 256 is TinyLlama (4 KV heads of 64), 768 the 125M shape.
void BM_AttendPaged(benchmark::State& state) {
  const int n_pos = static_cast<int>(state.range(0));
  const int kv_stride = static_cast<int>(state.range(2));
  const KvDtype dtype = state.range(3) == 0 ? KvDtype::kF32 : KvDtype::kF16;
  constexpr int kPageTokens = 16;
  const int n_pages = (n_pos + kPageTokens - 1) / kPageTokens;
  const size_t row_bytes = kv_stride * kv_dtype_bytes(dtype), block_bytes = kPageTokens * row_bytes;
  std::vector<std::byte> pool(n_pages * 2 * block_bytes);
  const std::vector<float> row(kv_stride, 0.01f);
  for (size_t at = 0; at < pool.size(); at += row_bytes) {
    kv_store_row(dtype, row.data(), pool.data() + at, kv_stride);
  }
  std::vector<KvSpan> spans;
  for (int s = 0; s < n_pages; ++s) {
    const std::byte* keys = pool.data() + 2 * s * block_bytes;
    spans.push_back(
        {keys, keys + block_bytes, std::min(kPageTokens, n_pos - s * kPageTokens), kKeyTile});
  }
  run_attention(state, spans, kv_stride, n_pos, static_cast<int>(state.range(1)), dtype);
}
BENCHMARK(BM_AttendPaged)
    ->ArgsProduct({{2048}, {8, 48}, {256}, {0, 1}})
    ->Args({2048, 48, 768, 0})
    ->Args({2048, 48, 768, 1})
    ->Args({2048, 3, 256, 1})
    ->Args({8192, 3, 256, 1});

// Decode attention (3 queries of one token, the 125M shape's GQA group) over 2048 cached
// positions split into spans of range(0) positions: 16 is the L2 pool's page, 2048 one contiguous
// buffer. What an L1 ring (the recent positions copied contiguously) could save at most.
void BM_AttendSpans(benchmark::State& state) {
  const int span_len = static_cast<int>(state.range(0));
  constexpr int kPos = 2048, kKvStride = 256;
  // Each span in its own block, apart from the next by 1 KiB more than its rows (a power-of-two
  // distance would put every span's rows in the same cache sets and measure that instead).
  const int n_spans = kPos / span_len;
  const size_t block = size_t{1} * (span_len + 1) * kKvStride;
  std::vector<float> kv(n_spans * block, 0.01f);
  std::vector<KvSpan> spans;
  for (int s = 0; s < n_spans; ++s) {
    spans.push_back(
        {kv.data() + s * block, kv.data() + s * block + kAttendHeadDim, span_len, kKeyTile});
  }
  run_attention(state, spans, kKvStride, kPos, 3);
}
BENCHMARK(BM_AttendSpans)->Arg(16)->Arg(128)->Arg(2048);

// One token's decode attention at 8192 cached positions of the ~125M shape (12 layers, 4 KV heads
// of 64, 3 query heads each) over an f16 cache in the L2 pool's own pages (kv/page_pool.h, 16
// positions for every layer): per layer, tasks of one KV head over 2048 positions taken from a
// shared counter by range(1) threads of the engine's pool, as model/transformer.cpp runs them.
// range(0) distinct pages: 512 gives every position its own (96 MiB: from DRAM, as a real 8k
// decode reads them), 4 reuses the same four (from the caches). Time is per token; bytes/s counts
// the K and V bytes a token reads. The gap between the two is what the memory costs (session 45).
struct DecodeKv {
  static constexpr int kLayers = 12, kKvHeads = 4, kGroup = 3, kPositions = 8192, kChunk = 2048;
  static constexpr int kPageTokens = 16, kKvDim = kKvHeads * kAttendHeadDim;
  static constexpr PageGeometry kGeometry{kPageTokens, kLayers, kKvDim, KvDtype::kF16};

  explicit DecodeKv(int n_distinct)
      : pool(kGeometry, n_distinct * PagePool::page_bytes_for(kGeometry)) {
    const std::vector<float> row(kKvDim, 0.01f);
    const size_t row_bytes = kGeometry.row_bytes();
    for (int i = 0; i < n_distinct; ++i) {
      const PageId page = *pool.allocate();
      pages.push_back(page);
      for (int layer = 0; layer < kLayers; ++layer) {
        for (int r = 0; r < kPageTokens; ++r) {
          kv_store_row(KvDtype::kF16, row.data(), pool.key_block(page, layer) + r * row_bytes,
                       kKvDim);
          kv_store_row(KvDtype::kF16, row.data(), pool.value_block(page, layer) + r * row_bytes,
                       kKvDim);
        }
      }
    }
  }
  PagePool pool;
  std::vector<PageId> pages;
};

void BM_AttendDecode(benchmark::State& state) {
  using D = DecodeKv;
  const int n_distinct = static_cast<int>(state.range(0));
  const D kv(n_distinct);
  ThreadPool& pool = pool_of(static_cast<int>(state.range(1)));
  constexpr int kTasks = D::kPositions / D::kChunk * D::kKvHeads;
  constexpr size_t kHeadBytes = kAttendHeadDim * kv_dtype_bytes(KvDtype::kF16);  // of a row
  std::vector<float> q(D::kKvHeads * D::kGroup * kAttendHeadDim, 0.1f);
  // Outputs on cache lines, as the engine's (core/cache_aligned.h).
  CacheAlignedVector<float> out(kTasks * D::kGroup * kAttendHeadDim);
  std::vector<float> stats(kTasks * D::kGroup * 2);
  std::vector<std::vector<float>> scratch(pool.size());
  const auto run_task = [&](int layer, int task, int thread) {
    const int chunk = task / D::kKvHeads, head = task % D::kKvHeads;
    thread_local std::vector<KvSpan> spans;
    spans.clear();
    for (int p = chunk * D::kChunk; p < (chunk + 1) * D::kChunk; p += D::kPageTokens) {
      const PageId page = kv.pages[(p / D::kPageTokens) % n_distinct];
      spans.push_back({kv.pool.key_block(page, layer) + head * kHeadBytes * D::kPageTokens,
                       kv.pool.value_block(page, layer) + head * kHeadBytes, D::kPageTokens,
                       D::kPageTokens});
    }
    AttentionQuery queries[D::kGroup];
    for (int i = 0; i < D::kGroup; ++i) {
      const int slot = task * D::kGroup + i;
      queries[i] = {q.data() + (head * D::kGroup + i) * kAttendHeadDim, D::kChunk,
                    out.data() + slot * kAttendHeadDim, 0, stats.data() + slot * 2};
    }
    attend_queries(queries, D::kGroup, spans.data(), static_cast<int>(spans.size()), D::kKvDim,
                   kAttendHeadDim, 0.125f, scratch[thread], KvDtype::kF16);
  };
  for (auto _ : state) {
    for (int layer = 0; layer < D::kLayers; ++layer) {
      std::atomic<int> next{0};
      pool.run([&](int thread) {
        for (int task = next++; task < kTasks; task = next++) run_task(layer, task, thread);
      });
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t{D::kPositions} * D::kLayers *
                          D::kGeometry.row_bytes() * 2);
}
BENCHMARK(BM_AttendDecode)->ArgsProduct({{4, 512}, {1, 2}})->UseRealTime();

void BM_Rmsnorm(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<float> x(n, 0.5f), w(n, 1.0f), out(n);
  for (auto _ : state) {
    rmsnorm(out.data(), x.data(), w.data(), n, 1e-5f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_Rmsnorm)->Arg(2048);

}  // namespace
}  // namespace k25

BENCHMARK_MAIN();
