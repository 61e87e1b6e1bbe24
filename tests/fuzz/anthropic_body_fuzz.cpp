// Anthropic Messages request bodies (/v1/messages, /v1/messages/count_tokens): any input either
// parses or is an ApiException (400 with a message); nothing else may escape, crash or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/anthropic_request.h"
#include "server/api_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the endpoint, the rest is the body.
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  k25::RequestDefaults defaults;
  defaults.context_size = 512;
  try {
    if (data[0] % 2 == 0) {
      k25::parse_messages_body(body, defaults);
    } else {
      k25::parse_count_tokens_body(body, defaults);
    }
  } catch (const k25::ApiException& e) {
    if (e.error().status != 400 || e.error().message.empty()) __builtin_trap();
  }
  return 0;
}
