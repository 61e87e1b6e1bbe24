// /v1/embeddings in OpenAI's shape: the request body (input as a string, strings, token ids or
// arrays of token ids; encoding_format float or base64; dimensions) and the response body.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k25 {

// One input: text to tokenise, or token ids used as they are.
struct EmbeddingInput {
  std::optional<std::string> text;
  std::vector<int64_t> ids;
};

struct EmbeddingRequestBody {
  std::vector<EmbeddingInput> inputs;  // at least one, none empty
  std::string model;
  bool base64 = false;                // encoding_format "base64" (default "float")
  std::optional<int64_t> dimensions;  // checked against the model by the caller
};

// OpenAI's limit on the inputs of one request.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// Throws ApiException (400) naming the field for anything malformed, an empty input or array, a
// mixed array, more than kMaxEmbeddingInputs inputs, or an unknown encoding_format.
EmbeddingRequestBody parse_embedding_body(std::string_view body);

// The floats as little-endian IEEE float32 bytes in standard base64 (with padding), as OpenAI
// sends an embedding for encoding_format "base64".
std::string base64_float32(const std::vector<float>& values);

// {"object":"list","data":[{"object":"embedding","index":i,"embedding":...}],"model":...,
//  "usage":{"prompt_tokens":N,"total_tokens":N}}
nlohmann::json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                                  const std::string& model, int64_t prompt_tokens);

}  // namespace k25
