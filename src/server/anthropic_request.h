// Request bodies of Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens):
// JSON in, the same ParsedRequest the OpenAI routes produce out (flavor Messages), so the
// conversation goes through the same chat rendering. Problems are ApiExceptions (400) naming the
// field; tool use is refused with a clear message (not supported on this route).
#pragma once

#include <string_view>

#include "server/request_parsing.h"

namespace k25 {

// `system` (a string or text blocks) becomes a leading system message; `messages` alternate
// user/assistant with string or text-block content; `max_tokens` is required.
ParsedRequest parse_messages_body(std::string_view body, const RequestDefaults& defaults);

// count_tokens: the same conversation fields, max_tokens not needed.
ParsedRequest parse_count_tokens_body(std::string_view body, const RequestDefaults& defaults);

}  // namespace k25
