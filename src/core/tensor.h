// A typed, non-owning view of a weight tensor (usually inside an mmap'd model file).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace k25 {

class MappedFile;

// Values are GGML's type ids, as stored in GGUF tensor infos.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
};

// The storage of a type k25 implements: `block_bytes` bytes hold `block_elements` consecutive
// row elements.
struct DTypeInfo {
  const char* name;
  int64_t block_elements;
  size_t block_bytes;
};

// Null for a type id k25 does not implement.
const DTypeInfo* dtype_info(DType type);
const char* dtype_name(DType type);

// ne[0] is the row length (contiguous), ne[1] the number of rows, as in GGUF.
struct TensorView {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const void* data = nullptr;
  size_t bytes = 0;
  // When set, the same matrix repacked for the matmul kernels (see kernels/repack.h), which
  // read it instead of `data`.
  const void* packed = nullptr;
  // The read-only file mapping `data` lies in, if any: row lookups read it with
  // MappedFile::read rather than through the mapping (see there).
  const MappedFile* file = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t row_length() const { return ne[0]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  bool empty() const { return data == nullptr; }
};

}  // namespace k25
