#include "server/tool_call_constraint.h"

namespace k25 {

using json = nlohmann::ordered_json;

namespace {

struct AllowedTool {
  std::string name;
  json parameters;
};

std::vector<AllowedTool> allowed_tools(const ToolRequest& request, const json& tools) {
  std::vector<AllowedTool> out;
  for (const json& tool : tools) {
    const json& f = tool["function"];
    const std::string name = f["name"].get<std::string>();
    if (request.choice == ToolChoiceMode::Named && name != request.forced_name) continue;
    auto it = f.find("parameters");
    json parameters = it == f.end() || it->is_null()
                          ? json{{"type", "object"}, {"properties", json::object()}}
                          : *it;
    out.push_back({name, std::move(parameters)});
  }
  return out;
}

// {"<name_key>": NAME, "<arguments_key>": {...}} for one tool (keys in this order); Cohere's
// objects also carry a call id first.
json call_object_schema(const AllowedTool& tool, const char* name_key, const char* arguments_key,
                        bool with_call_id) {
  json properties = json::object();
  json required = json::array();
  if (with_call_id) {
    properties["tool_call_id"] = {{"type", "string"}};
    required.push_back("tool_call_id");
  }
  properties[name_key] = {{"const", tool.name}};
  properties[arguments_key] = tool.parameters;
  required.push_back(name_key);
  required.push_back(arguments_key);
  return {{"type", "object"},
          {"properties", properties},
          {"required", required},
          {"additionalProperties", false}};
}

json any_call_schema(const std::vector<AllowedTool>& tools, const char* name_key,
                     const char* arguments_key, bool with_call_id = false) {
  if (tools.size() == 1) return call_object_schema(tools[0], name_key, arguments_key, with_call_id);
  json any = json::array();
  for (const AllowedTool& tool : tools) {
    any.push_back(call_object_schema(tool, name_key, arguments_key, with_call_id));
  }
  return {{"anyOf", any}};
}

json array_of(json item, bool parallel) {
  json schema = {{"type", "array"}, {"items", std::move(item)}, {"minItems", 1}};
  if (!parallel) schema["maxItems"] = 1;
  return schema;
}

// One alternative per tool: the name is literal text, the arguments are the JSON value.
std::vector<ToolCallConstraintPart> named_parts(const std::vector<AllowedTool>& tools,
                                                const std::string& before_name,
                                                const std::string& after_name,
                                                const std::string& suffix) {
  std::vector<ToolCallConstraintPart> parts;
  for (const AllowedTool& tool : tools) {
    parts.push_back({before_name + tool.name + after_name, tool.parameters, suffix});
  }
  return parts;
}

}  // namespace

ToolCallConstraint tool_call_constraint(ToolCallFormat format, const ToolRequest& request,
                                        const json& specs) {
  const std::vector<AllowedTool> tools = allowed_tools(request, specs);
  ToolCallConstraint c;
  switch (format) {
    case ToolCallFormat::Hermes:
    case ToolCallFormat::QwenXml:
    case ToolCallFormat::GlmXml:
      c.alternatives = {
          {"<tool_call>\n", any_call_schema(tools, "name", "arguments"), "\n</tool_call>"}};
      c.repeat = request.parallel;
      c.separator = "\n";
      break;
    case ToolCallFormat::ToolCallsTag:
      c.alternatives = {{"<tool_calls>",
                         array_of(any_call_schema(tools, "name", "arguments"), request.parallel),
                         "</tool_calls>"}};
      break;
    case ToolCallFormat::CohereAction:
      c.alternatives = {
          {"<|START_ACTION|>",
           array_of(any_call_schema(tools, "tool_name", "parameters", true), request.parallel),
           "<|END_ACTION|>"}};
      break;
    case ToolCallFormat::Llama3Json:
      // Llama 3.x makes one call per turn.
      c.alternatives = {{"", any_call_schema(tools, "name", "parameters"), ""}};
      break;
    case ToolCallFormat::Firefunction:
      c.alternatives = {{" functools",
                         array_of(any_call_schema(tools, "name", "arguments"), request.parallel),
                         ""}};
      break;
    case ToolCallFormat::Mistral:
      c.alternatives = named_parts(tools, "[TOOL_CALLS]", "[ARGS]", "");
      c.repeat = request.parallel;
      break;
    case ToolCallFormat::DeepSeek:
      c.begin = "<｜tool▁calls▁begin｜>";
      c.alternatives =
          named_parts(tools, "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>");
      c.repeat = request.parallel;
      c.end = "<｜tool▁calls▁end｜>";
      break;
    case ToolCallFormat::KimiK2:
      // The call id's index is not checked by the parser, so every call may say 0.
      c.begin = "<|tool_calls_section_begin|>";
      c.alternatives = named_parts(tools, "<|tool_call_begin|>functions.",
                                   ":0<|tool_call_argument_begin|>", "<|tool_call_end|>");
      c.repeat = request.parallel;
      c.end = "<|tool_calls_section_end|>";
      break;
  }
  return c;
}

}  // namespace k25
