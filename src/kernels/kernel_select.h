// Which kernel set to run, from the CPU's features and an optional request (K25_ISA).
#pragma once

#include <string>
#include <string_view>

#include "kernels/cpu_features.h"

namespace k25 {

// Kernel set names, lowest first.
inline constexpr std::string_view kKernelIsas[] = {"scalar", "avx2", "avxvnni", "avx512"};

// The first CPU feature `isa` needs that `cpu` lacks ("" when it runs it, "unknown" for a name
// that is no kernel set).
std::string missing_feature(const CpuFeatures& cpu, std::string_view isa);

// `requested` if given ("" = none) and runnable, else the best set the CPU runs. Throws
// k25::Error for a request that names no set or one the CPU lacks a feature for.
std::string choose_kernel_isa(const CpuFeatures& cpu, std::string_view requested);

}  // namespace k25
