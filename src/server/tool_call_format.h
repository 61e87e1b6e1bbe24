// How a model writes tool calls: chosen once, at model load, from the markers its chat template
// contains (the template renders earlier calls the way the model was trained to emit them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k25 {

enum class ToolCallFormat {
  Hermes,   // <tool_call>{"name", "arguments"}</tool_call> (Qwen 2.5/3, Hermes, granite 4,
            // MiMo, Bielik, Reka; also the format of models whose template has none)
  QwenXml,  // <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>
  GlmXml,   // <tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value></tool_call>
  ToolCallsTag,  // <tool_calls>[{...}] or one {...} a line</tool_calls> (Apriel, MiniMax-M1)
  Llama3Json,    // {"name", "parameters"} as the whole answer, or after <|python_tag|>
  Firefunction,  // " functools[{"name", "arguments"}, ...]"
  Mistral,       // [TOOL_CALLS]NAME[CALL_ID]id[ARGS]{...} or [TOOL_CALLS][{"name", "arguments"}]
  DeepSeek,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
             // (V3.1; R1's "function<｜tool▁sep｜>NAME\n```json\n{...}\n```" too)
  KimiK2,    // <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0
             // <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
  CohereAction,  // <|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>
};

ToolCallFormat detect_tool_call_format(std::string_view template_text);
const char* tool_call_format_name(ToolCallFormat format);

// The texts that open a tool call in this format: output from the first of them on is held back
// while streaming until it parses (or turns out to be text).
struct ToolCallStart {
  std::string marker;
  bool only_at_beginning = false;  // counts only when nothing but whitespace comes before it
};
std::vector<ToolCallStart> tool_call_starts(ToolCallFormat format);

}  // namespace k25
