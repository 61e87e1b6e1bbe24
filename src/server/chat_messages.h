// Validation of the chat request fields the template reads: messages and tools pass through to
// the template as sent, so their shape is checked here, with a 400 that names the problem.
#pragma once

#include <nlohmann/json.hpp>

namespace k25 {

// Objects with a string role; content a string, null or an array of text parts; name and
// tool_call_id strings; tool_calls an array of objects; reasoning_content a string or null.
void validate_chat_messages(const nlohmann::ordered_json& messages);
// Absent/null or an array of objects.
void validate_chat_tools(const nlohmann::ordered_json& tools);

}  // namespace k25
