#include "server/tool_call_response.h"

#include <random>

namespace k25 {

using nlohmann::json;

std::string new_tool_call_id(ToolCallFormat format) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  const bool mistral = format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[pick(rng)];
  return id;
}

void assign_tool_call_ids(std::vector<ToolCall>& calls, ToolCallFormat format) {
  for (ToolCall& call : calls) {
    if (call.id.empty()) call.id = new_tool_call_id(format);
  }
}

json tool_calls_message_json(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& call : calls) {
    out.push_back({{"id", call.id},
                   {"type", "function"},
                   {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return out;
}

json tool_calls_delta_json(const std::vector<ToolCall>& calls) {
  json out = tool_calls_message_json(calls);
  for (size_t i = 0; i < out.size(); ++i) out[i]["index"] = i;
  return out;
}

}  // namespace k25
