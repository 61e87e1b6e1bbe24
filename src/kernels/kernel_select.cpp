#include "kernels/kernel_select.h"

#include "core/error.h"

namespace k25 {

std::string missing_feature(const CpuFeatures& cpu, std::string_view isa) {
  struct Need {
    bool present;
    const char* feature;
  };
  const Need scalar[] = {{cpu.sse42 || !cpu.x86_64, "sse4.2"},
                         {cpu.popcnt || !cpu.x86_64, "popcnt"}};
  const Need avx2[] = {
      {cpu.avx2, "avx2"}, {cpu.fma, "fma"}, {cpu.f16c, "f16c"}, {cpu.bmi2, "bmi2"}};
  const auto first_missing = [](const auto& needs) -> std::string {
    for (const Need& n : needs) {
      if (!n.present) return n.feature;
    }
    return "";
  };
  if (isa == "scalar") return first_missing(scalar);
  std::string missing = first_missing(scalar);
  if (missing.empty()) missing = first_missing(avx2);
  if (isa == "avx2") return missing;
  if (isa == "avxvnni") return !missing.empty() ? missing : cpu.avxvnni ? "" : "avxvnni";
  if (isa == "avx512") {
    if (!missing.empty()) return missing;
    if (!cpu.avx512) return "avx512f/bw/dq/vl";
    return cpu.avx512vnni ? "" : "avx512vnni";
  }
  return "unknown";
}

std::string choose_kernel_isa(const CpuFeatures& cpu, std::string_view requested) {
  if (!requested.empty()) {
    const std::string missing = missing_feature(cpu, requested);
    if (missing == "unknown") {
      fail("K25_ISA=", requested, " is not a kernel set (scalar, avx2, avxvnni or avx512)");
    }
    if (!missing.empty()) {
      fail("K25_ISA=", requested, " needs the CPU feature ", missing, ", which this CPU lacks");
    }
    return std::string(requested);
  }
  std::string best;
  for (std::string_view isa : kKernelIsas) {
    if (missing_feature(cpu, isa).empty()) best = isa;
  }
  if (best.empty()) fail("this CPU lacks ", missing_feature(cpu, "scalar"), ", which k25 needs");
  return best;
}

}  // namespace k25
