// Internal to src/kernels/set: whether this kernel set has VNNI, and what that means for the
// packed Q8_0 layout (kernels/repack.h), shared by the packer and the packed tiles.
#pragma once

#include <cstdint>

#include "kernels/set/x86_intrinsics.h"

// VNNI's dpbusd does the u8 x s8 dot of four bytes into an int32 lane in one instruction: 256-bit
// under AVX-512 VL (the avx512 set) or as AVX-VNNI (the avxvnni set: Alder Lake, Zen 5).
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define K25_MATMUL_VNNI 1
#define K25_DPBUSD256 _mm256_dpbusd_epi32
#elif defined(__AVXVNNI__)
#define K25_MATMUL_VNNI 1
#define K25_DPBUSD256 _mm256_dpbusd_avx_epi32
#endif

namespace k25::K25_KERNEL_SET {

// XORed into every Q8_0 quant when it is packed. dpbusd takes the weights as its unsigned
// operand, so the VNNI sets store q + 128; the avx2 set's sign trick wants q itself (storing it
// offset cost one xor per 32 quants per tile, about 5% of the Q8_0 prefill tile's operations).
#if defined(K25_MATMUL_VNNI)
constexpr uint8_t kPackedQ8Flip = 0x80;
#else
constexpr uint8_t kPackedQ8Flip = 0;
#endif

// Whether the packed Q8_0 tiles of this set have a faster form for groups whose quants are in
// [-127, 127] (the avx2 set's moves x's sign onto the weights, see block_dots in
// packed_halves_256.h and kernels/repack.h); dpbusd takes any quant.
#if defined(K25_MATMUL_VNNI)
constexpr bool kPackedQ8NeedsSymmetric = false;
#else
constexpr bool kPackedQ8NeedsSymmetric = true;
#endif

}  // namespace k25::K25_KERNEL_SET
