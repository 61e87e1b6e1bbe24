#include "kernels/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <cstdint>
#endif

namespace k25 {

#if defined(__x86_64__)
namespace {

struct Regs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return Regs{};
  return r;
}

bool bit(unsigned reg, int i) {
  return ((reg >> i) & 1u) != 0;
}

// XCR0: which register state the OS saves on a context switch.
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  f.x86_64 = true;
  const Regs l1 = cpuid(1, 0);
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  const Regs ext = cpuid(0x80000001, 0);
  f.sse42 = bit(l1.ecx, 20);
  f.popcnt = bit(l1.ecx, 23);
  const bool osxsave = bit(l1.ecx, 27);
  const uint64_t xcr = osxsave ? xcr0() : 0;
  const bool ymm_state = (xcr & 0x6) == 0x6;    // SSE + AVX
  const bool zmm_state = (xcr & 0xe6) == 0xe6;  // + opmask, ZMM0-15 upper, ZMM16-31
  const bool avx = bit(l1.ecx, 28) && ymm_state;
  // x86-64-v3 also has BMI1, LZCNT and MOVBE; they come with AVX2 on every CPU that has it,
  // but the avx2 set is compiled for them, so they are checked too.
  const bool v3_rest = bit(l7.ebx, 3) && bit(ext.ecx, 5) && bit(l1.ecx, 22);
  f.avx2 = avx && bit(l7.ebx, 5) && v3_rest;
  f.fma = avx && bit(l1.ecx, 12);
  f.f16c = avx && bit(l1.ecx, 29);
  f.bmi2 = bit(l7.ebx, 8);
  f.avxvnni = avx && bit(l7s1.eax, 4);
  f.avx512 = zmm_state && bit(l7.ebx, 16) && bit(l7.ebx, 17) && bit(l7.ebx, 28) &&
             bit(l7.ebx, 30) && bit(l7.ebx, 31);
  f.avx512vnni = f.avx512 && bit(l7.ecx, 11);
  return f;
}
#else
CpuFeatures detect_cpu_features() {
  return {};
}
#endif

}  // namespace k25
