#include "model/tensor.h"

namespace k25 {

const char* dtype_name(DType type) {
  switch (type) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::Q4_0:
      return "Q4_0";
    case DType::Q8_0:
      return "Q8_0";
    case DType::BF16:
      return "BF16";
  }
  return "unknown";
}

}  // namespace k25
