// The tool-calling fields of a chat request (OpenAI's `tools`, `tool_choice`,
// `parallel_tool_calls`) and the tool turns of a conversation (assistant `tool_calls`, `tool`
// messages), validated. Every problem is a 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace k25 {

enum class ToolChoiceMode {
  Auto,      // the model may call tools or answer
  None,      // the model answers; its output is not parsed for calls
  Required,  // the model must call one or more tools
  Named,     // the model must call the tool `ToolRequest::forced_name`
};

struct ToolRequest {
  // The request's `tools`, as given (each {"type":"function","function":{...}}); an empty array
  // when it has none.
  nlohmann::json tools = nlohmann::json::array();
  ToolChoiceMode choice = ToolChoiceMode::Auto;
  std::string forced_name;  // Named: the function's name
  bool parallel = true;     // parallel_tool_calls

  // Whether the output is parsed for tool calls.
  bool parses_calls() const { return !tools.empty() && choice != ToolChoiceMode::None; }
  // Required and Named: the output must be a call (the constraint the grammar enforces).
  bool forces_call() const {
    return parses_calls() &&
           (choice == ToolChoiceMode::Required || choice == ToolChoiceMode::Named);
  }
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` of a chat request body.
ToolRequest parse_tool_request(const nlohmann::json& body);

// Checks the tool turns of `messages` (an array of objects): an assistant's `tool_calls` are
// [{"id", "type":"function", "function":{"name", "arguments": string or object}}]; a `tool`
// message has a `tool_call_id` that an earlier assistant message issued.
void check_tool_messages(const nlohmann::json& messages);

}  // namespace k25
