// Repacking Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K matrices into the interleaved layout of
// kernels/repack.h, on the kernel sets whose matmul reads it (all but the scalar one).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "kernels/set/kquant_blocks.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"
#include "kernels/set/vnni.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {

bool repack_supported(DType type) {
#if defined(K25_MATMUL_PACKED)
  return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q5_K ||
         type == DType::Q6_K;
#else
  (void)type;
  return false;
#endif
}

#if defined(K25_MATMUL_PACKED)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized reports at every use.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

template <DType D>
using Block = std::conditional_t<D == DType::Q8_0, BlockQ8_0, BlockQ4_0>;

// Any n_rows, one byte at a time (a tensor's last group).
template <DType D>
constexpr PackedBlockUnits kUnits{packed_quant_bytes(D)};

template <DType D>
void pack_group_bytes(const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows,
                      int64_t n_blocks, uint8_t* group) {
  constexpr uint8_t kZero = D == DType::Q8_0 ? kPackedQ8Flip : 0x88;
  constexpr size_t kPieces = kUnits<D>.quant_bytes / 64;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* out = group + kUnits<D>.quants_at(b);
    auto* d = reinterpret_cast<uint16_t*>(group + kUnits<D>.scales_at(b));
    for (int i = 0; i < kPackedGroupRows; ++i) {
      if (i >= n_rows) {
        d[i] = 0;
        for (size_t k = 0; k < kPieces; ++k) std::memset(out + 64 * k + 4 * i, kZero, 4);
        continue;
      }
      const auto& block = reinterpret_cast<const Block<D>*>(w + (r0 + i) * w_row_bytes)[b];
      d[i] = block.d;
      for (size_t k = 0; k < kPieces; ++k) {
        for (int j = 0; j < 4; ++j) {
          const uint8_t q = static_cast<uint8_t>(block.qs[4 * k + j]);
          out[64 * k + 4 * i + j] = D == DType::Q8_0 ? q ^ kPackedQ8Flip : q;
        }
      }
    }
  }
}

// 16 full rows from r0: each 64-byte piece is a gather of one 4-byte word from each row.
template <DType D>
void pack_group_gather(const uint8_t* w, size_t w_row_bytes, int64_t r0, int64_t n_blocks,
                       uint8_t* packed) {
  constexpr size_t kQuantBytes = kUnits<D>.quant_bytes;
  const uint8_t* group = w + r0 * w_row_bytes;
#if defined(__AVX512F__)
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(w_row_bytes)));
  const __m512i offset = _mm512_set1_epi8(D == DType::Q8_0 ? static_cast<char>(kPackedQ8Flip) : 0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * sizeof(Block<D>);
    uint8_t* out = packed + kUnits<D>.quants_at(b);
    for (size_t k = 0; k < kQuantBytes / 64; ++k) {
      const __m512i piece = _mm512_i32gather_epi32(rows, block + 2 + 4 * k, 1);
      _mm512_store_si512(out + 64 * k, _mm512_xor_si512(piece, offset));
    }
    // The scale is the low half of the word at the block start (the rest is the first quants).
    const __m512i d = _mm512_i32gather_epi32(rows, block, 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(packed + kUnits<D>.scales_at(b)),
                        _mm512_cvtepi32_epi16(d));
  }
#else
  // Rows 0..7 and 8..15 of the group: two gathers per piece.
  const __m256i rows = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                          _mm256_set1_epi32(static_cast<int32_t>(w_row_bytes)));
  const __m256i offset = _mm256_set1_epi8(D == DType::Q8_0 ? static_cast<char>(kPackedQ8Flip) : 0);
  const uint8_t* upper = group + 8 * w_row_bytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const size_t at = b * sizeof(Block<D>);
    uint8_t* out = packed + kUnits<D>.quants_at(b);
    for (size_t k = 0; k < kQuantBytes / 64; ++k) {
      const auto* lo = reinterpret_cast<const int*>(group + at + 2 + 4 * k);
      const auto* hi = reinterpret_cast<const int*>(upper + at + 2 + 4 * k);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64 * k),
                         _mm256_xor_si256(_mm256_i32gather_epi32(lo, rows, 1), offset));
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + 64 * k + 32),
                         _mm256_xor_si256(_mm256_i32gather_epi32(hi, rows, 1), offset));
    }
    uint8_t* scales = packed + kUnits<D>.scales_at(b);
    for (int i = 0; i < kPackedGroupRows; ++i) {
      std::memcpy(scales + 2 * i, group + i * w_row_bytes + at, 2);
    }
  }
#endif
}

template <DType D>
void pack_group_typed(const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows,
                      int64_t n_blocks, uint8_t* group) {
  // Gather offsets are 32-bit.
  if (n_rows == kPackedGroupRows && w_row_bytes * kPackedGroupRows < (size_t{1} << 31)) {
    pack_group_gather<D>(w, w_row_bytes, r0, n_blocks, group);
  } else {
    pack_group_bytes<D>(w, w_row_bytes, r0, n_rows, n_blocks, group);
  }
  for (int64_t b = n_blocks; b % kPackedUnitBlocks != 0; ++b) {  // the last unit's missing blocks
    std::memset(group + kUnits<D>.quants_at(b), 0, kUnits<D>.quant_bytes);
    std::memset(group + kUnits<D>.scales_at(b), 0, 2 * kPackedGroupRows);
  }
}

// Rows [r0, r0 + n_rows) of a Q4_K or Q5_K matrix with n_super super-blocks per row into one
// group (layout in repack.h); rows past n_rows are zero with scales 0.
template <typename Block>
void pack_group_k4(const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows, int64_t n_super,
                   uint8_t* out) {
  constexpr bool kFifthBit = std::is_same_v<Block, BlockQ5_K>;
  constexpr PackedK4Layout kLayout = PackedK4Layout::of(kFifthBit);
  for (int64_t b = 0; b < n_super; ++b, out += kLayout.bytes) {
    if (n_rows < kPackedGroupRows) std::memset(out, 0, kLayout.bytes);
    auto* d = reinterpret_cast<uint16_t*>(out + kLayout.d);
    auto* dmin = reinterpret_cast<uint16_t*>(out + kLayout.dmin);
    for (int i = 0; i < n_rows; ++i) {
      const auto& block = reinterpret_cast<const Block*>(w + (r0 + i) * w_row_bytes)[b];
      for (int p = 0; p < 32; ++p) std::memcpy(out + 64 * p + 4 * i, block.qs + 4 * p, 4);
      if constexpr (kFifthBit) {
        for (int p = 0; p < 8; ++p) {
          std::memcpy(out + kLayout.high + 64 * p + 4 * i, block.qh + 4 * p, 4);
        }
      }
      uint8_t sc[8], mn[8];
      unpack_scales_mins_k4(block.scales, sc, mn);
      for (int s = 0; s < 8; ++s) {
        out[kLayout.scales + 16 * s + i] = sc[s];
        out[kLayout.mins + 32 * (s / 2) + 2 * i + s % 2] = mn[s];
      }
      d[i] = block.d;
      dmin[i] = block.dmin;
    }
  }
}

// The same for Q6_K.
void pack_group_q6_k(const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows, int64_t n_super,
                     uint8_t* out) {
  namespace L = packed_q6k;
  for (int64_t b = 0; b < n_super; ++b, out += L::kBytes) {
    if (n_rows < kPackedGroupRows) std::memset(out, 0, L::kBytes);
    auto* d = reinterpret_cast<float*>(out + L::kD);
    for (int i = 0; i < n_rows; ++i) {
      const auto& block = reinterpret_cast<const BlockQ6_K*>(w + (r0 + i) * w_row_bytes)[b];
      for (int n = 0; n < 2; ++n) {
        for (int l = 0; l < 32; ++l) {
          const uint8_t lo02 = block.ql[64 * n + l], lo13 = block.ql[64 * n + 32 + l];
          const uint8_t h = block.qh[32 * n + l];  // top bits of e = 0..3 at bits 2e, 2e + 1
          const size_t at = 64 * (8 * n + l / 4) + 4 * i + l % 4;
          out[at] = static_cast<uint8_t>((lo02 & 0x0f) | (h & 0x03) << 4 | (h & 0x30) << 2);
          out[L::kB + at] = static_cast<uint8_t>((lo13 & 0x0f) | (h & 0x0c) << 2 | (h & 0xc0));
          out[L::kC + at] = static_cast<uint8_t>(lo02 >> 4 | (lo13 & 0xf0));
        }
      }
      for (int s = 0; s < 16; ++s) {
        out[L::kScalePairs + 32 * (s / 2) + 2 * i + s % 2] = static_cast<uint8_t>(block.scales[s]);
      }
      d[i] = half_to_float(block.d);
    }
  }
}

// Whether a packed Q8_0 group holds a quant of -128 (kernels/repack.h).
bool holds_q8_minimum(const uint8_t* group, int64_t n_blocks) {
  constexpr PackedBlockUnits kQ8Units{packed_quant_bytes(DType::Q8_0)};
  constexpr uint8_t kMinimum = 0x80 ^ kPackedQ8Flip;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (std::memchr(group + kQ8Units.quants_at(b), kMinimum, kQ8Units.quant_bytes) != nullptr) {
      return true;
    }
  }
  return false;
}

}  // namespace

void pack_group(DType type, const uint8_t* w, size_t w_row_bytes, int64_t r0, int n_rows,
                int64_t n_blocks, uint8_t* group) {
  if (type == DType::Q8_0) {
    pack_group_typed<DType::Q8_0>(w, w_row_bytes, r0, n_rows, n_blocks, group);
  } else {
    pack_group_typed<DType::Q4_0>(w, w_row_bytes, r0, n_rows, n_blocks, group);
  }
}
#endif  // K25_MATMUL_PACKED

PackedWeights repack_matrices(const std::vector<TensorView*>& weights, int n_threads,
                              const RepackedRangeFn& on_repacked) {
  // Each matrix starts 64-byte aligned within the buffer, as every group does within a matrix.
  constexpr size_t kMatrixAlign = 64;
  std::vector<size_t> offsets;
  offsets.reserve(weights.size());
  size_t total = 0;
  // Work items of up to kChunkGroups groups, over all tensors, so threads balance across tensors
  // of different sizes.
  struct Item {
    size_t tensor;
    int64_t g0, g1;
  };
  constexpr int64_t kChunkGroups = 64;
  std::vector<Item> items;
  for (size_t i = 0; i < weights.size(); ++i) {
    const TensorView& w = *weights[i];
    if (!repack_supported(w.type)) {
      fail("repack: tensor '", w.name, "' has type ", dtype_name(w.type),
           ", which this build does not repack");
    }
    const int64_t rows = w.n_rows();
    const size_t need = row_bytes(w.type, w.row_length()) * static_cast<size_t>(rows);
    if (w.data == nullptr || w.bytes < need) {
      fail("repack: tensor '", w.name, "' has ", w.bytes, " bytes of data, needs ", need);
    }
    const int64_t n_groups = packed_group_count(rows);
    offsets.push_back(total);
    total += packed_matrix_bytes(w.type, rows, w.row_length());
    total = (total + kMatrixAlign - 1) / kMatrixAlign * kMatrixAlign;
    for (int64_t g = 0; g < n_groups; g += kChunkGroups) {
      items.push_back({i, g, std::min(n_groups, g + kChunkGroups)});
    }
  }
  PackedWeights out = PackedWeights::allocate(std::max<size_t>(1, total));
#if defined(K25_MATMUL_PACKED)
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t k = next.fetch_add(1); k < items.size(); k = next.fetch_add(1)) {
      const Item& it = items[k];
      const TensorView& w = *weights[it.tensor];
      const int64_t cols = w.row_length();
      const int64_t rows = w.n_rows();
      const size_t w_row_bytes = row_bytes(w.type, cols);
      const size_t group_bytes = packed_group_bytes(w.type, cols);
      uint8_t* base = out.mutable_data() + offsets[it.tensor];
      uint8_t* q8_minimum_flags =
          w.type == DType::Q8_0 ? base + packed_q8_minimum_flags(rows, cols) : nullptr;
      for (int64_t g = it.g0; g < it.g1; ++g) {
        uint8_t* group = base + g * group_bytes;
        const int64_t r0 = g * kPackedGroupRows;
        const int n_rows = static_cast<int>(std::min<int64_t>(kPackedGroupRows, rows - r0));
        const auto* data = static_cast<const uint8_t*>(w.data);
        if (w.type == DType::Q4_K) {
          pack_group_k4<BlockQ4_K>(data, w_row_bytes, r0, n_rows, cols / 256, group);
        } else if (w.type == DType::Q5_K) {
          pack_group_k4<BlockQ5_K>(data, w_row_bytes, r0, n_rows, cols / 256, group);
        } else if (w.type == DType::Q6_K) {
          pack_group_q6_k(data, w_row_bytes, r0, n_rows, cols / 256, group);
        } else {
          pack_group(w.type, data, w_row_bytes, r0, n_rows, cols / 32, group);
          if (q8_minimum_flags != nullptr) q8_minimum_flags[g] = holds_q8_minimum(group, cols / 32);
        }
      }
      if (on_repacked) {
        const int64_t r0 = it.g0 * kPackedGroupRows;
        const int64_t r1 = std::min(rows, it.g1 * kPackedGroupRows);
        on_repacked(it.tensor, static_cast<const uint8_t*>(w.data) + r0 * w_row_bytes,
                    static_cast<size_t>(r1 - r0) * w_row_bytes);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::min<int64_t>(n_threads, static_cast<int64_t>(items.size())); ++i) {
    threads.emplace_back(work);
  }
  work();
  for (auto& t : threads) t.join();
#else
  (void)n_threads;
  (void)on_repacked;
#endif
  for (size_t i = 0; i < weights.size(); ++i) weights[i]->packed = out.mutable_data() + offsets[i];
  return out;
}

}  // namespace k25::K25_KERNEL_SET
