// libFuzzer target for the safetensors reader: any input must either parse into tensors that lie
// inside the buffer or throw k25::Error; touching each tensor's first and last byte lets
// AddressSanitizer catch a view that escapes the input.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/safetensors.h"
#include "touch.h"

using k25::fuzz::touch;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = k25::SafetensorsFile::parse(data, size, "fuzz.safetensors");
    for (const auto& [key, value] : file->metadata()) {
      touch(key.data(), key.size());
      touch(value.data(), value.size());
    }
    for (const k25::TensorView& t : file->tensors()) {
      touch(t.data, t.bytes);
      if (file->tensor(t.name) != &t) __builtin_trap();
    }
  } catch (const k25::Error&) {
  }
  return 0;
}
