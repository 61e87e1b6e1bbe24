#include "core/tensor.h"

namespace k25 {

const DTypeInfo* dtype_info(DType type) {
  // Block sizes and bytes as GGML defines them (super-blocks of 256 for the K-quants and IQ4_XS).
  static constexpr DTypeInfo kF32{"F32", 1, 4}, kF16{"F16", 1, 2}, kBF16{"BF16", 1, 2},
      kQ4_0{"Q4_0", 32, 18}, kQ4_1{"Q4_1", 32, 20}, kQ5_0{"Q5_0", 32, 22}, kQ5_1{"Q5_1", 32, 24},
      kQ8_0{"Q8_0", 32, 34}, kQ2_K{"Q2_K", 256, 84}, kQ3_K{"Q3_K", 256, 110},
      kQ4_K{"Q4_K", 256, 144}, kQ5_K{"Q5_K", 256, 176}, kQ6_K{"Q6_K", 256, 210},
      kIQ4_NL{"IQ4_NL", 32, 18}, kIQ4_XS{"IQ4_XS", 256, 136};
  switch (type) {
    case DType::F32:
      return &kF32;
    case DType::F16:
      return &kF16;
    case DType::BF16:
      return &kBF16;
    case DType::Q4_0:
      return &kQ4_0;
    case DType::Q4_1:
      return &kQ4_1;
    case DType::Q5_0:
      return &kQ5_0;
    case DType::Q5_1:
      return &kQ5_1;
    case DType::Q8_0:
      return &kQ8_0;
    case DType::Q2_K:
      return &kQ2_K;
    case DType::Q3_K:
      return &kQ3_K;
    case DType::Q4_K:
      return &kQ4_K;
    case DType::Q5_K:
      return &kQ5_K;
    case DType::Q6_K:
      return &kQ6_K;
    case DType::IQ4_NL:
      return &kIQ4_NL;
    case DType::IQ4_XS:
      return &kIQ4_XS;
  }
  return nullptr;
}

const char* dtype_name(DType type) {
  const DTypeInfo* info = dtype_info(type);
  return info != nullptr ? info->name : "unknown";
}

}  // namespace k25
