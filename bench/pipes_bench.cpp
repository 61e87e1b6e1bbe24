// How many of each vector instruction the AVX2 kernels are built from issue per nanosecond on this
// core, alone and in pairs, with the clock beside them (BM_Pipes_clock: a chain of dependent
// scalar adds, one per cycle, so its Gadds/s is the clock in GHz). A pair that runs at the rate
// of one of its instructions alone shares that instruction's pipes. docs/benchmarks.md (session
// 34) reads the kernels' issue bounds off these figures. A benchmark, not a test.
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace {

bool has_avx2_fma() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// 12 independent register-to-register instructions, A and B alternating, all reading the same two
// sources and each writing its own register, so only issue limits them.
#define K25_PIPES_OP(I, N) I " %[a], %[b], %%ymm" #N "\n\t"
// clang-format off
#define K25_PIPES_12(A, B)                                                     \
  K25_PIPES_OP(A, 0) K25_PIPES_OP(B, 1) K25_PIPES_OP(A, 2) K25_PIPES_OP(B, 3)  \
  K25_PIPES_OP(A, 4) K25_PIPES_OP(B, 5) K25_PIPES_OP(A, 6) K25_PIPES_OP(B, 7)  \
  K25_PIPES_OP(A, 8) K25_PIPES_OP(B, 9) K25_PIPES_OP(A, 10) K25_PIPES_OP(B, 11)
// clang-format on

constexpr int kBlocksPerIteration = 1000;

// Instructions (12 per block) per second, in billions.
benchmark::Counter giga_per_second(const benchmark::State& state) {
  return benchmark::Counter(
      12.0 * kBlocksPerIteration * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

#define K25_PIPES_BENCH(NAME, A, B)                                                            \
  __attribute__((target("avx2,fma"))) void BM_Pipes_##NAME(benchmark::State& state) {          \
    if (!has_avx2_fma()) {                                                                     \
      state.SkipWithError("needs AVX2 and FMA");                                               \
      return;                                                                                  \
    }                                                                                          \
    /* Small positive floats: no denormals in the float instructions. */                       \
    const __m256i a = _mm256_castps_si256(_mm256_set1_ps(1.5f));                               \
    const __m256i b = _mm256_castps_si256(_mm256_set1_ps(0.75f));                              \
    for (auto _ : state) {                                                                     \
      for (int i = 0; i < kBlocksPerIteration; ++i) {                                          \
        asm volatile(K25_PIPES_12(A, B)::[a] "x"(a), [b] "x"(b)                                \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                       "xmm9", "xmm10", "xmm11");                                              \
      }                                                                                        \
    }                                                                                          \
    state.counters["Gops"] = giga_per_second(state);                                           \
  }                                                                                            \
  BENCHMARK(BM_Pipes_##NAME)

void BM_Pipes_clock(benchmark::State& state) {
  uint64_t x = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBlocksPerIteration; ++i) {
      asm volatile(
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          : "+r"(x));
    }
  }
  state.counters["Gadds"] = giga_per_second(state);
}
BENCHMARK(BM_Pipes_clock);

// Alone.
K25_PIPES_BENCH(maddubs, "vpmaddubsw", "vpmaddubsw");
K25_PIPES_BENCH(madd, "vpmaddwd", "vpmaddwd");
K25_PIPES_BENCH(sign, "vpsignb", "vpsignb");
K25_PIPES_BENCH(shufb, "vpshufb", "vpshufb");
K25_PIPES_BENCH(pand, "vpand", "vpand");
K25_PIPES_BENCH(add32, "vpaddd", "vpaddd");
K25_PIPES_BENCH(fma, "vfmadd231ps", "vfmadd231ps");
K25_PIPES_BENCH(mulps, "vmulps", "vmulps");
// In pairs.
K25_PIPES_BENCH(maddubs_madd, "vpmaddubsw", "vpmaddwd");
K25_PIPES_BENCH(maddubs_fma, "vpmaddubsw", "vfmadd231ps");
K25_PIPES_BENCH(madd_mulps, "vpmaddwd", "vmulps");
K25_PIPES_BENCH(maddubs_sign, "vpmaddubsw", "vpsignb");
K25_PIPES_BENCH(sign_shufb, "vpsignb", "vpshufb");
K25_PIPES_BENCH(maddubs_shufb, "vpmaddubsw", "vpshufb");
K25_PIPES_BENCH(maddubs_add32, "vpmaddubsw", "vpaddd");
K25_PIPES_BENCH(sign_add32, "vpsignb", "vpaddd");

}  // namespace
#endif  // __x86_64__

BENCHMARK_MAIN();
