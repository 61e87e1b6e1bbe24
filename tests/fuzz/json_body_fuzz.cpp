// Request-body parsing and validation of every JSON endpoint: any input either parses or is an
// ApiException (400 with a message); nothing else may escape, crash or hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/request_parsing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the endpoint, the rest is the body.
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  k25::RequestDefaults defaults;
  defaults.context_size = 512;
  try {
    switch (data[0] % 5) {
      case 0:
        k25::parse_request_body(k25::ApiFlavor::Generate, body, defaults);
        break;
      case 1:
        k25::parse_request_body(k25::ApiFlavor::Completions, body, defaults);
        break;
      case 2:
        k25::parse_request_body(k25::ApiFlavor::Chat, body, defaults);
        break;
      case 3:
        k25::parse_tokenize_body(body);
        break;
      case 4:
        k25::parse_detokenize_body(body, 512);
        break;
    }
  } catch (const k25::ApiException& e) {
    if (e.error().status != 400 || e.error().message.empty()) __builtin_trap();
  }
  return 0;
}
