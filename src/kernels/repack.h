// Q8_0 / Q4_0 weight matrices repacked for the SIMD matmul kernels (every set but the scalar
// one): groups of 16 rows interleaved in 4-byte pieces, so one 512-bit dpbusd advances the dots
// of 16 rows with a token at once (a 256-bit step those of 8: each half of a piece) and every
// lane ends up holding the whole integer dot of one row.
//
// Layout of a repacked matrix: group g (rows [16g, 16g + 16)) starts at
// g * packed_group_bytes(type, cols). Within a group, block b's quants take packed_quant_bytes
// bytes at b * packed_quant_bytes: piece k (64 bytes) holds bytes [4k, 4k + 4) of the block's
// quants for each of the 16 rows, row i in bytes [4i, 4i + 4). Q8_0 quants are stored offset by
// +128 (unsigned) on the sets with VNNI and as they are on the avx2 set; Q4_0 keeps its nibble
// bytes. Blocks go in units of four (PackedBlockUnits): the quants of the unit's four blocks,
// then the 16 f16 row scales of each of them in turn (a last unit short of blocks is padded with
// zeros), so a group is one sequential stream, 64-byte aligned unit by unit. (With all scales
// after all quants, the second stream cost the avx2 Q8_0 decode kernel about a fifth of its
// speed on one Zen 5 thread. Units of two blocks streamed from DRAM slower on one Zen 5 core,
// Q4_0 by 15-45% and Q8_0 by 4-9%, and units of eight Q4_0 blocks by 12-18%, whatever the loop
// did with them: see docs/benchmarks.md, session 37.) Rows past the end of the tensor are zero
// with scale 0. A Q8_0 matrix ends with one flag byte per group (packed_q8_minimum_flags below).
//
// Q4_K groups (16 rows too) are one sequence of kPackedQ4kSuperBytes per super-block of 256,
// so a group is a single stream: the 128 quant bytes of each row as 32 pieces of 64 bytes (piece
// p: bytes [4p, 4p + 4) of the 16 rows, row i at 4i, nibbles as the file has them), then the 8
// sub-block scales unpacked to bytes (sub-block s: 16 bytes, row i at s * 16 + i), the 8
// minimums as byte pairs (pair q: 32 bytes, row i's minimums 2q and 2q + 1 at 2i, 2i + 1), and
// the 16 f16 d, then the 16 f16 dmin. 2368 bytes for 16 x 144 in the file (+2.8%).
// Q5_K groups are Q4_K's with the 32 qh bytes of each row as 8 pieces after the quant pieces:
// kPackedQ5kSuperBytes = 2880 for 16 x 176 (+2.3%).
// Q6_K groups likewise, kPackedQ6kSuperBytes per super-block. The file keeps element 128n + 32e
// + l (l < 32) of a row as a nibble of ql (low: e = 0, 1; high: e = 2, 3) and two bits of qh;
// the group stores, per row and (n, l), three bytes instead, so that groups 0 and 1 need one
// mask and groups 2 and 3 four or five operations (the file's layout took four to five each):
//   A = quant e = 0 (6 bits) | top 2 bits of e = 2 << 6,  B = quant e = 1 | top 2 bits of e = 3
//   << 6,  C = low 4 bits of e = 2 | low 4 bits of e = 3 << 4,
// each as 16 pieces (piece 8n + k: (n, l = 4k..4k+3)) of 64 bytes: A at 0, B at 1024, C at 2048;
// then the 16 int8 scales as pairs (pair q: 32 bytes, row i's scales 2q and 2q + 1 at 2i,
// 2i + 1), then the 16 d as f32. 3392 bytes for 16 x 210 (+0.95%).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace k25 {

constexpr int kPackedGroupRows = 16;

// Byte offsets within one packed super-block of a K-quant group (the layouts above), shared by
// the packer (kernels/set/repack_groups.cpp) and the kernels (kernels/set/packed_kquants.h).
struct PackedK4Layout {  // Q4_K (fifth_bit false) and Q5_K
  size_t high, scales, mins, d, dmin, bytes;
  static constexpr PackedK4Layout of(bool fifth_bit) {
    const size_t scales = fifth_bit ? 2048 + 512 : 2048;  // Q5_K: 8 qh pieces first
    return {2048, scales, scales + 128, scales + 256, scales + 256 + 32, scales + 256 + 64};
  }
};
namespace packed_q6k {  // Q6_K
constexpr size_t kB = 1024, kC = 2048, kScalePairs = 3072, kD = 3072 + 256, kBytes = kD + 64;
}  // namespace packed_q6k
constexpr size_t kPackedQ4kSuperBytes = PackedK4Layout::of(false).bytes;
constexpr size_t kPackedQ5kSuperBytes = PackedK4Layout::of(true).bytes;
constexpr size_t kPackedQ6kSuperBytes = packed_q6k::kBytes;
static_assert(kPackedQ4kSuperBytes == 2368 && kPackedQ5kSuperBytes == 2880 &&
              kPackedQ6kSuperBytes == 3392);

// Bytes of one block's quants for the 16 rows of a group: 512 (Q8_0) or 256 (Q4_0).
constexpr size_t packed_quant_bytes(DType type) {
  return type == DType::Q8_0 ? 512 : 256;
}

// Where block b of a Q8_0 / Q4_0 group lies, in bytes from the group's start (layout above):
// blocks go in units of kPackedUnitBlocks, the quants of the unit's blocks and then their scales.
constexpr int64_t kPackedUnitBlocks = 4;
struct PackedBlockUnits {
  size_t quant_bytes;  // packed_quant_bytes(type)
  constexpr size_t unit_bytes() const {
    return static_cast<size_t>(kPackedUnitBlocks) * (quant_bytes + 2 * kPackedGroupRows);
  }
  // Within a unit: the quants and the scales of its block i (0 <= i < kPackedUnitBlocks).
  constexpr size_t quants_in_unit(int64_t i) const { return static_cast<size_t>(i) * quant_bytes; }
  constexpr size_t scales_in_unit(int64_t i) const {
    return static_cast<size_t>(kPackedUnitBlocks) * quant_bytes +
           static_cast<size_t>(i) * 2 * kPackedGroupRows;
  }
  constexpr size_t quants_at(int64_t b) const {
    return static_cast<size_t>(b / kPackedUnitBlocks) * unit_bytes() +
           quants_in_unit(b % kPackedUnitBlocks);
  }
  constexpr size_t scales_at(int64_t b) const {
    return static_cast<size_t>(b / kPackedUnitBlocks) * unit_bytes() +
           scales_in_unit(b % kPackedUnitBlocks);
  }
};
// Groups of a matrix with `rows` rows (the last one padded).
constexpr int64_t packed_group_count(int64_t rows) {
  return (rows + kPackedGroupRows - 1) / kPackedGroupRows;
}

// Bytes of one group of a matrix with `cols` columns (cols a multiple of the type's block), a
// multiple of 64.
size_t packed_group_bytes(DType type, int64_t cols);

// A repacked Q8_0 matrix has, after its last group, one byte per group: 1 where the group holds
// a quant of -128, else 0. (llama.cpp's and k25's quantisers write none, but a file may. The
// avx2 set's tiles move x's sign onto the weights, where -(-128) is no int8, so they read those
// groups the other way round; see block_dots in kernels/set/packed_halves_256.h.) The flags' offset
// from the matrix's start:
size_t packed_q8_minimum_flags(int64_t rows, int64_t cols);

// Bytes of a repacked matrix: its groups, and the flags above for Q8_0.
size_t packed_matrix_bytes(DType type, int64_t rows, int64_t cols);

// An owned, 64-byte aligned buffer of repacked weight matrices, one after another.
class PackedWeights {
 public:
  PackedWeights() = default;
  const void* data() const { return data_.get(); }
  uint8_t* mutable_data() { return static_cast<uint8_t*>(data_.get()); }
  size_t bytes() const { return bytes_; }

  // Uninitialised; large buffers on transparent huge pages.
  static PackedWeights allocate(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t bytes_ = 0;
};

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// Whether the active kernel set's matmul runs on repacked weights of this type (Q8_0, Q4_0,
// Q4_K, Q5_K and Q6_K on every set but the scalar one). Elsewhere nothing is repacked and matmul
// reads the weights as they are.
bool repack_supported(DType type);
#endif

// Called (from any of the repacking threads) once the bytes [begin, begin + bytes) of
// weights[tensor] have been repacked and will not be read again by the repack.
using RepackedRangeFn = std::function<void(size_t tensor, const void* begin, size_t bytes)>;

// A kernel set's own files call its entries instead (kernels/set/set_entries.h).
#if !defined(K25_BUILDING_KERNEL_SET)
// Repacks every tensor of `weights` (all must satisfy repack_supported) on n_threads threads
// and points each view's `packed` at its copy, all of them in the one returned buffer, so a
// model's small matrices are on transparent huge pages too: with the q, k, v and o matrices on
// 4 KiB pages the 1.1B Q4_0 decode was 2% slower (avx2, 2 threads, AMD Zen 5; see
// docs/benchmarks.md, session 38), and a huge page of its own for each would have added 157 MB
// to its 736 MB. The views' own bytes are only read.
PackedWeights repack_matrices(const std::vector<TensorView*>& weights, int n_threads,
                              const RepackedRangeFn& on_repacked = {});
#endif

}  // namespace k25
