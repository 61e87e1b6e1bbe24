// Anthropic Messages API shapes (POST /v1/messages): the message object, the named
// server-sent events of a streamed message, and Anthropic's error body.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/response_format.h"

namespace k25 {

// {"id": "msg_…", "type": "message", "role": "assistant", "content": [{"type": "text", …}], …}
nlohmann::json anthropic_message(const ResponseContext& ctx, const GenerationOutcome& outcome);

// Streaming, in the order Anthropic's SDK expects: message_start, content_block_start, ping;
// content_block_delta (text_delta) per piece of text; content_block_stop, message_delta (stop
// reason and usage), message_stop.
std::string anthropic_stream_start(const ResponseContext& ctx);
std::string anthropic_stream_text(const std::string& text);
std::string anthropic_stream_end(const ResponseContext& ctx, const GenerationOutcome& outcome);
// "event: error" with the error body; the stream ends after it.
std::string anthropic_stream_error(const ApiError& error);

// {"type": "error", "error": {"type": "invalid_request_error", "message": …}}; the error type
// follows the HTTP status as Anthropic's do.
nlohmann::json anthropic_error_body(const ApiError& error);

}  // namespace k25
