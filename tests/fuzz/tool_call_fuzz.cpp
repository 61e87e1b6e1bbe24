// Tool-call parsing of model output: any text in any format parses (into content and calls of
// the offered tools, every call's arguments a JSON object) without crashing, and the streaming
// parser, fed the same text in pieces, gives the same result.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/tool_call_parser.h"
#include "server/tool_call_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // Byte 0 picks the format, byte 1 the piece size of the stream; the rest is the answer.
  const auto format = static_cast<k25::ToolCallFormat>(data[0] % 10);
  const size_t piece = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  static const nlohmann::json tools = nlohmann::json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"s": {"type": "string"}, "n": {"type": "number"}}}}},
          {"type": "function", "function": {"name": "g"}}])");
  const k25::ToolCallParse whole = k25::parse_tool_calls(format, text, tools);
  for (const k25::ToolCall& call : whole.calls) {
    if (!nlohmann::json::parse(call.arguments, nullptr, false).is_object()) __builtin_trap();
    if (call.name != "f" && call.name != "g") __builtin_trap();
  }
  k25::ToolCallStream stream(format, tools);
  std::string content;
  for (size_t pos = 0; pos < text.size(); pos += piece)
    content += stream.push(text.substr(pos, piece));
  const k25::ToolCallParse last = stream.finish();
  content += last.content;
  if (content != whole.content || !(last.calls == whole.calls)) __builtin_trap();
  return 0;
}
