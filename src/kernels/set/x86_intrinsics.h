// The x86 intrinsics, included on x86 only. Every use in the kernel sets sits under the macros of
// the instructions it needs (__AVX2__, __AVX512F__, __F16C__, __SSE4_1__...), so on another
// architecture (aarch64) the scalar set compiles from the portable code alone.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
