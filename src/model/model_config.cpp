#include "model/model_config.h"

namespace k25 {

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::Llama:
      return "llama";
    case Arch::Qwen2:
      return "qwen2";
    case Arch::Qwen3:
      return "qwen3";
    case Arch::Qwen3Moe:
      return "qwen3moe";
    case Arch::Gemma3:
      return "gemma3";
  }
  return "llama";
}

}  // namespace k25
