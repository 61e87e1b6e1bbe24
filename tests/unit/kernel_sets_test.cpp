// Kernel sets (kernels/kernel_table.h): which set a CPU gets, K25_ISA's errors, the features
// detected on this machine, and every set this machine runs computing the same products
// (within the float tolerance that FMA and vector widths leave).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_select.h"
#include "kernels/kernel_table.h"
#include "random_weights.h"

namespace k25 {
namespace {

CpuFeatures nehalem() {
  CpuFeatures f;
  f.x86_64 = f.sse42 = f.popcnt = true;
  return f;
}

CpuFeatures zen3() {
  CpuFeatures f = nehalem();
  f.avx2 = f.fma = f.f16c = f.bmi2 = true;
  return f;
}

CpuFeatures alder_lake() {
  CpuFeatures f = zen3();
  f.avxvnni = true;
  return f;
}

CpuFeatures zen4() {
  CpuFeatures f = zen3();
  f.avx512 = f.avx512vnni = true;
  return f;
}

CpuFeatures sapphire_rapids() {
  CpuFeatures f = zen4();
  f.avxvnni = true;
  return f;
}

TEST(KernelSelect, EachCpuGetsTheBestSetItRuns) {
  EXPECT_EQ(choose_kernel_isa(nehalem(), ""), "scalar");
  EXPECT_EQ(choose_kernel_isa(zen3(), ""), "avx2");
  EXPECT_EQ(choose_kernel_isa(alder_lake(), ""), "avxvnni");
  EXPECT_EQ(choose_kernel_isa(zen4(), ""), "avx512");
  EXPECT_EQ(choose_kernel_isa(sapphire_rapids(), ""), "avx512");
  // Skylake-SP: AVX-512 without VNNI runs the AVX2 set.
  CpuFeatures skylake_sp = zen3();
  skylake_sp.avx512 = true;
  EXPECT_EQ(choose_kernel_isa(skylake_sp, ""), "avx2");
}

TEST(KernelSelect, ARequestForALowerSetIsHonoured) {
  for (const char* isa : {"scalar", "avx2", "avxvnni", "avx512"}) {
    EXPECT_EQ(choose_kernel_isa(sapphire_rapids(), isa), isa);
  }
  EXPECT_EQ(choose_kernel_isa(zen4(), "avx2"), "avx2");
}

// The error names the first feature missing.
std::string request_error(const CpuFeatures& cpu, const char* isa) {
  try {
    choose_kernel_isa(cpu, isa);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(KernelSelect, ARequestTheCpuCannotRunFailsNamingTheMissingFeature) {
  EXPECT_EQ(request_error(zen3(), "avx512"),
            "K25_ISA=avx512 needs the CPU feature avx512f/bw/dq/vl, which this CPU lacks");
  EXPECT_EQ(request_error(zen4(), "avxvnni"),
            "K25_ISA=avxvnni needs the CPU feature avxvnni, which this CPU lacks");
  EXPECT_EQ(request_error(nehalem(), "avx2"),
            "K25_ISA=avx2 needs the CPU feature avx2, which this CPU lacks");
  CpuFeatures no_f16c = zen3();
  no_f16c.f16c = false;
  EXPECT_EQ(request_error(no_f16c, "avx2"),
            "K25_ISA=avx2 needs the CPU feature f16c, which this CPU lacks");
  EXPECT_EQ(request_error(sapphire_rapids(), "neon"),
            "K25_ISA=neon is not a kernel set (scalar, avx2, avxvnni or avx512)");
  CpuFeatures core2;
  core2.x86_64 = true;
  EXPECT_EQ(request_error(core2, ""), "this CPU lacks sse4.2, which k25 needs");
}

// On another architecture (an aarch64 build) the scalar set is compiled for that architecture's
// baseline: it needs no x86 feature, and the x86 sets are refused by name.
TEST(KernelSelect, ACpuThatIsNotX86RunsTheScalarSet) {
  const CpuFeatures arm;
  EXPECT_EQ(choose_kernel_isa(arm, ""), "scalar");
  EXPECT_EQ(choose_kernel_isa(arm, "scalar"), "scalar");
  EXPECT_EQ(request_error(arm, "avx2"),
            "K25_ISA=avx2 needs the CPU feature avx2, which this CPU lacks");
}

#if defined(__x86_64__)

// /proc/cpuinfo's flags, as the kernel reports them.
std::string cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  }
  return "";
}

// Whether LZCNT executes as itself: on a CPU without it the same bytes run as BSR, which gives
// the highest set bit's index (0 for 1) where LZCNT gives the leading zeros (31).
bool lzcnt_executes() {
  unsigned in = 1, out = 0;
  asm("lzcnt %1, %0" : "=r"(out) : "r"(in));
  return out == 31;
}

TEST(CpuFeatures, DetectionAgreesWithTheKernelsFlags) {
  const std::string flags = cpuinfo_flags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  const auto has = [&](const char* f) {
    return flags.find(" " + std::string(f) + " ") != std::string::npos;
  };
  const CpuFeatures cpu = detect_cpu_features();
  EXPECT_EQ(cpu.sse42, has("sse4_2"));
  // Some guest kernels leave "abm" (LZCNT) out of their flags on CPUs that have it (seen on a
  // Zen 5 VM whose CPUID reports it): there the instruction itself answers.
  const bool abm = has("abm") || lzcnt_executes();
  EXPECT_EQ(cpu.avx2, has("avx2") && has("bmi1") && abm && has("movbe"));
  EXPECT_EQ(cpu.fma, has("fma"));
  EXPECT_EQ(cpu.f16c, has("f16c"));
  EXPECT_EQ(cpu.bmi2, has("bmi2"));
  EXPECT_EQ(cpu.avxvnni, has("avx_vnni"));
  EXPECT_EQ(cpu.avx512, has("avx512f") && has("avx512bw") && has("avx512dq") && has("avx512vl") &&
                            has("avx512cd"));
  EXPECT_EQ(cpu.avx512vnni, cpu.avx512 && has("avx512_vnni"));
}
#endif  // __x86_64__

#if defined(__x86_64__)
constexpr const char* kCompiledIsas[] = {"scalar", "avx2", "avxvnni", "avx512"};
#else
constexpr const char* kCompiledIsas[] = {"scalar"};
#endif

TEST(KernelTable, EverySetIsCompiledInAndTheActiveOneIsRunnable) {
  for (const char* isa : kCompiledIsas) {
    const KernelTable* t = find_kernel_table(isa);
    ASSERT_NE(t, nullptr) << isa;
    EXPECT_STREQ(t->isa, isa);
  }
  EXPECT_EQ(find_kernel_table("neon"), nullptr);
#if !defined(__x86_64__)
  EXPECT_EQ(find_kernel_table("avx2"), nullptr);
#endif
  const std::vector<std::string> runnable = runnable_kernel_isas();
  ASSERT_FALSE(runnable.empty());
  EXPECT_EQ(runnable.front(), "scalar");
  EXPECT_NE(std::find(runnable.begin(), runnable.end(), kernels().isa), runnable.end());
  const char* requested = std::getenv("K25_ISA");
  EXPECT_EQ(kernels().isa, requested != nullptr ? std::string(requested) : runnable.back());
}

// The same products from every set this CPU runs: the scalar set's are the yardstick, and the
// others may differ only by float rounding (FMA, summation order of wider vectors).
TEST(KernelTable, EveryRunnableSetComputesTheSameProducts) {
  const KernelTable& scalar = *find_kernel_table("scalar");
  ThreadPool pool(2);
  std::mt19937 rng(3);
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t rows = 37, cols = 512;
    const int n_tokens = 5;
    testing::Weights w = testing::make_weights(type, rows, cols, rng);
    w.view.data = w.bytes.data();
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(n_tokens * cols);
    for (float& v : x) v = g(rng);
    std::vector<float> want(n_tokens * rows);
    scalar.matmul(w.view, x.data(), n_tokens, want.data(), pool);
    float mag = 0.0f;
    for (float v : want) mag = std::max(mag, std::fabs(v));
    for (const std::string& isa : runnable_kernel_isas()) {
      const KernelTable& set = *find_kernel_table(isa);
      PackedWeights packed;
      TensorView view = w.view;
      if (set.repack_supported(type)) {
        std::vector<TensorView*> views{&view};
        packed = set.repack_matrices(views, 1, {});
      }
      std::vector<float> got(want.size());
      set.matmul(view, x.data(), n_tokens, got.data(), pool);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4f * mag) << isa << " " << dtype_name(type) << " " << i;
      }
      std::vector<float> row(cols), row_scalar(cols);
      set.dequantize_row(type, w.bytes.data(), row.data(), cols);
      scalar.dequantize_row(type, w.bytes.data(), row_scalar.data(), cols);
      EXPECT_EQ(row, row_scalar) << isa << " " << dtype_name(type);
    }
  }
}

}  // namespace
}  // namespace k25
