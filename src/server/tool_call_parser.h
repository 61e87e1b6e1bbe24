// Tool calls out of a model's answer: the answer's text is split into content and the calls
// it makes, in the model's format (server/tool_call_format.h). Output that does not parse as
// calls of the offered tools stays content, unchanged.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_format.h"

namespace k25 {

struct ToolCall {
  std::string id;  // empty until assign_tool_call_ids (tool_call_response.h)
  std::string name;
  std::string arguments;  // a JSON object's text, compact ({"city":"Paris"})
  bool operator==(const ToolCall&) const = default;
};

struct ToolCallParse {
  std::string content;  // text before (and after) the calls, whitespace at the seams trimmed
  std::vector<ToolCall> calls;
};

// `tools` is the request's tools array: only calls of these functions count, and the
// parameter schemas type the values of the XML formats.
ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text,
                               const nlohmann::json& tools);

// The pieces parse_tool_calls is made of, shared with the streaming parser.
// Where the first start marker of the format begins in `text` (npos: none). `at_beginning`:
// nothing but whitespace precedes `text` in the answer.
size_t find_tool_call_start(ToolCallFormat format, std::string_view text, bool at_beginning);
struct ToolCallSection {
  std::vector<ToolCall> calls;
  std::string_view trailing;  // what follows the calls
};
// Parses the calls at the start of `section` (which begins with a start marker); nullopt when
// it is not a complete, well-formed run of calls of the offered tools.
std::optional<ToolCallSection> parse_tool_call_section(ToolCallFormat format,
                                                       std::string_view section,
                                                       const nlohmann::json& tools);
// The content around a section: `before` without trailing whitespace, then `after` trimmed.
std::string content_around_calls(std::string_view before, std::string_view after);

}  // namespace k25
