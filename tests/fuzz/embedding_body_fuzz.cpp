// /v1/embeddings bodies: any input either parses or is an ApiException (400 with a message);
// nothing else may escape, crash or hang. A parsed body's vectors go through the base64 encoder.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/api_error.h"
#include "server/embedding_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    k25::EmbeddingRequestBody parsed = k25::parse_embedding_body(body);
    if (parsed.inputs.empty()) __builtin_trap();
    std::vector<float> values;
    for (int64_t id : parsed.inputs.front().ids) values.push_back(static_cast<float>(id));
    const std::string encoded = k25::base64_float32(values);
    if (encoded.size() != (values.size() * 4 + 2) / 3 * 4) __builtin_trap();
  } catch (const k25::ApiException& e) {
    if (e.error().status != 400 || e.error().message.empty()) __builtin_trap();
  }
  return 0;
}
