// API key checks for --api-key / api_key_file: OpenAI's Bearer header, Anthropic's x-api-key.
#pragma once

#include <string_view>

namespace k25 {

// True when `authorization` is "Bearer <key>". The comparison takes the same time wherever the
// first difference is, so response timing does not reveal a prefix of the key.
bool bearer_matches(std::string_view authorization, std::string_view key);
// True when `given` (an x-api-key header) is the key; constant time in the same way.
bool key_matches(std::string_view given, std::string_view key);

}  // namespace k25
