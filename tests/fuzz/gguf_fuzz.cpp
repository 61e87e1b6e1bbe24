// libFuzzer target for the GGUF reader: any input must either parse into tensors that lie inside
// the buffer or throw k25::Error. Touching every tensor's first and last byte and every metadata
// value lets AddressSanitizer catch a view that escapes the input.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "touch.h"

namespace {

using k25::fuzz::touch;

void touch(const k25::GgufValue& v) {
  std::visit(
      [](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          touch(x.data(), x.size());
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          for (const std::string& s : x) touch(s.data(), s.size());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>>) {
          touch(x.data(), x.size() * sizeof(x[0]));
        } else {
          touch(&x, sizeof(x));
        }
      },
      v.value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto file = k25::GgufFile::parse(data, size, "fuzz.gguf");
    for (const auto& [key, value] : file->metadata()) {
      touch(key.data(), key.size());
      touch(value);
    }
    for (const k25::TensorView& t : file->tensors()) {
      touch(t.data, t.bytes);
      if (file->tensor(t.name) != &t) __builtin_trap();
    }
    // Typed getters on keys the model loader reads must throw or answer, never crash.
    file->get_int_or("general.alignment", 32);
    file->get_string_or("general.architecture", "");
    if (file->has("tokenizer.ggml.tokens")) file->get_string_array("tokenizer.ggml.tokens");
  } catch (const k25::Error&) {
  }
  return 0;
}
