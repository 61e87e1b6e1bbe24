// Tool calls in OpenAI's response shapes: message.tool_calls of a whole response and the
// tool_calls deltas of a stream.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/tool_call_parser.h"

namespace k25 {

// "call_" and 24 random letters and digits, as OpenAI's ids look; for the Mistral format 9 letters
// and digits, since Mistral's templates refuse any other id when the conversation comes back.
std::string new_tool_call_id(ToolCallFormat format);
// Gives every call without an id a new one.
void assign_tool_call_ids(std::vector<ToolCall>& calls, ToolCallFormat format);

// [{"id", "type": "function", "function": {"name", "arguments"}}]
nlohmann::json tool_calls_message_json(const std::vector<ToolCall>& calls);
// The same with each call's "index", for a stream's delta (each call whole in one delta).
nlohmann::json tool_calls_delta_json(const std::vector<ToolCall>& calls);

}  // namespace k25
