// The server-sent events of a streamed generation in its API's framing: /generate's and
// OpenAI's `data:` events ending with `data: [DONE]`, Anthropic's named events ending with
// message_stop. A failed stream ends with the API's error event instead.
#pragma once

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/response_format.h"

namespace k25 {

std::string stream_opening(const ResponseContext& ctx, int n_choices);
// Empty when there is nothing to say (no text and no logprobs).
std::string stream_text(const ResponseContext& ctx, int index, const std::string& text,
                        const std::vector<TokenLogprobEntry>* logprobs);
std::string stream_choice_end(const ResponseContext& ctx, int index,
                              const GenerationOutcome& outcome);
std::string stream_closing(const ResponseContext& ctx,
                           const std::vector<GenerationOutcome>& choices);
// OpenAI: `data: {"error": …}` and nothing after it (OpenAI's SDKs raise on it); Anthropic:
// `event: error`; /generate keeps its `data: {"error": …}` then `data: [DONE]`.
std::string stream_error(const ResponseContext& ctx, const ApiError& error);

}  // namespace k25
