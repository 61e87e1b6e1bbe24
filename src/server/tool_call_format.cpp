#include "server/tool_call_format.h"

namespace k25 {

namespace {

bool has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view t) {
  // Most specific first: Qwen XML and GLM templates also contain "<tool_call>".
  if (has(t, "tool▁calls▁begin")) return ToolCallFormat::DeepSeek;
  if (has(t, "<|tool_calls_section_begin|>")) return ToolCallFormat::KimiK2;
  if (has(t, "[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (has(t, "<tool_call>") && has(t, "<arg_key>")) return ToolCallFormat::GlmXml;
  if (has(t, "<tool_call>") && has(t, "<function=")) return ToolCallFormat::QwenXml;
  if (has(t, "<tool_call>")) return ToolCallFormat::Hermes;
  if (has(t, "<tool_calls>")) return ToolCallFormat::ToolCallsTag;
  if (has(t, " functools[")) return ToolCallFormat::Firefunction;
  if (has(t, "<|START_ACTION|>")) return ToolCallFormat::CohereAction;
  if (has(t, "<|start_header_id|>") && has(t, "<|python_tag|>")) return ToolCallFormat::Llama3Json;
  return ToolCallFormat::Hermes;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes:
      return "hermes";
    case ToolCallFormat::QwenXml:
      return "qwen-xml";
    case ToolCallFormat::GlmXml:
      return "glm-xml";
    case ToolCallFormat::ToolCallsTag:
      return "tool-calls-tag";
    case ToolCallFormat::Llama3Json:
      return "llama3-json";
    case ToolCallFormat::Firefunction:
      return "firefunction";
    case ToolCallFormat::Mistral:
      return "mistral";
    case ToolCallFormat::DeepSeek:
      return "deepseek";
    case ToolCallFormat::KimiK2:
      return "kimi-k2";
    case ToolCallFormat::CohereAction:
      return "cohere-action";
  }
  return "hermes";
}

std::vector<ToolCallStart> tool_call_starts(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::Hermes:
    case ToolCallFormat::QwenXml:
    case ToolCallFormat::GlmXml:
      return {{"<tool_call>"}};
    case ToolCallFormat::ToolCallsTag:
      return {{"<tool_calls>"}};
    case ToolCallFormat::Llama3Json:
      return {{"{", true}, {"<|python_tag|>"}};
    case ToolCallFormat::Firefunction:
      return {{" functools["}, {"functools[", true}};
    case ToolCallFormat::Mistral:
      return {{"[TOOL_CALLS]"}};
    case ToolCallFormat::DeepSeek:
      // R1 distills often open with the call itself.
      return {{"<｜tool▁calls▁begin｜>"}, {"<｜tool▁call▁begin｜>"}};
    case ToolCallFormat::KimiK2:
      return {{"<|tool_calls_section_begin|>"}, {"<|tool_call_begin|>"}};
    case ToolCallFormat::CohereAction:
      return {{"<|START_ACTION|>"}};
  }
  return {};
}

}  // namespace k25
