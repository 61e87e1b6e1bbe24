// What the CPU (and the OS, for the wide register state) supports, from CPUID and XGETBV.
#pragma once

namespace k25 {

struct CpuFeatures {
  // An x86-64 CPU (what an x86-64 build runs on): the scalar set is then compiled for
  // x86-64-v2 and needs SSE4.2 and POPCNT. Elsewhere (aarch64) it needs nothing more than the
  // architecture, and the fields below stay false.
  bool x86_64 = false;
  bool sse42 = false;
  bool popcnt = false;
  bool avx2 = false;  // with the OS saving YMM state
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avxvnni = false;     // 256-bit VNNI (Alder Lake, Sapphire Rapids, Zen 5)
  bool avx512 = false;      // F, CD, BW, DQ, VL (x86-64-v4), with the OS saving ZMM state
  bool avx512vnni = false;  // with avx512
};

// This machine's features (all false on a CPU that is not x86-64).
CpuFeatures detect_cpu_features();

}  // namespace k25
