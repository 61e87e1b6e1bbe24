// The x-* fingerprint headers (R-FP1): any header values either parse into hints within their
// documented ranges or are an ApiException (400) naming the header.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/flash_headers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Input: four values separated by '\n', for the four headers in order; an absent part means
  // an absent header.
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const char* names[] = {"x-prompt-length", "x-response-length", "x-latency-sla", "x-domain-hint"};
  std::optional<std::string_view> values[4];
  size_t start = 0;
  for (int i = 0; i < 4 && start <= input.size(); ++i) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    values[i] = input.substr(start, end - start);
    start = end + 1;
  }
  auto header = [&](std::string_view name) -> std::optional<std::string_view> {
    for (int i = 0; i < 4; ++i) {
      if (name == names[i]) return values[i];
    }
    return std::nullopt;
  };
  try {
    k25::FlashHints hints = k25::parse_flash_headers(header);
    if (hints.prompt_length &&
        (*hints.prompt_length < 0 || *hints.prompt_length > k25::kMaxHeaderLength)) {
      __builtin_trap();
    }
    if (hints.domain.empty() || hints.domain.size() > 64) __builtin_trap();
    const int priority = k25::sla_priority(hints.sla);
    if (priority != 10 && priority != 50 && priority != 100) __builtin_trap();
  } catch (const k25::ApiException& e) {
    bool named = false;
    for (const char* name : names) named = named || e.error().param == name;
    if (e.error().status != 400 || !named) __builtin_trap();
  }
  return 0;
}
