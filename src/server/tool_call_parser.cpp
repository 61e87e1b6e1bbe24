#include "server/tool_call_parser.h"

#include <set>

#include "core/json_nesting.h"

namespace k25 {

using nlohmann::json;

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Where the JSON object or array starting at s[pos] (an opening bracket) ends: one past its
// closing bracket; npos when it does not close. The value itself is checked by the JSON parser
// afterwards.
size_t json_extent(std::string_view s, size_t pos) {
  JsonNesting nesting;
  for (size_t i = pos; i < s.size(); ++i) {
    if (nesting.step(s[i]) == 0) return i + 1;
  }
  return std::string_view::npos;
}

// A read position in the text of a section; every step either advances or reports failure.
struct Cursor {
  std::string_view s;
  size_t pos = 0;

  std::string_view rest() const { return s.substr(pos); }
  bool at(std::string_view literal) const { return rest().starts_with(literal); }
  bool eat(std::string_view literal) {
    if (!at(literal)) return false;
    pos += literal.size();
    return true;
  }
  void skip_space() {
    while (pos < s.size() && is_space(s[pos])) ++pos;
  }
  // The text before `literal`, stepping past both; nullopt when `literal` never comes.
  std::optional<std::string_view> until(std::string_view literal) {
    const size_t end = s.find(literal, pos);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view text = s.substr(pos, end - pos);
    pos = end + literal.size();
    return text;
  }
  // A JSON object or array at the cursor (after whitespace).
  std::optional<json> json_value() {
    skip_space();
    if (pos >= s.size() || (s[pos] != '{' && s[pos] != '[')) return std::nullopt;
    const size_t end = json_extent(s, pos);
    if (end == std::string_view::npos) return std::nullopt;
    json value = json::parse(s.substr(pos, end - pos), nullptr, false);
    if (value.is_discarded()) return std::nullopt;
    pos = end;
    return value;
  }
};

// A JSON value's compact text; bytes of the model's text that are not UTF-8 become U+FFFD.
std::string compact(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Arguments as OpenAI sends them: a JSON object's compact text. Models write an object, or a
// string holding one.
std::optional<std::string> arguments_text(const json* arguments) {
  if (!arguments || arguments->is_null()) return "{}";
  if (arguments->is_object()) return compact(*arguments);
  if (arguments->is_string()) {
    json parsed = json::parse(arguments->get<std::string>(), nullptr, false);
    if (parsed.is_object()) return compact(parsed);
  }
  return std::nullopt;
}

const json* member(const json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

// {"name", "arguments"|"parameters"}, Cohere's {"tool_name", "parameters"}, or the OpenAI shape
// {"type": "function", "function": {...}} that some models echo.
std::optional<ToolCall> call_from_object(const json& object) {
  if (!object.is_object()) return std::nullopt;
  if (const json* function = member(object, "function"); function && function->is_object()) {
    return call_from_object(*function);
  }
  const json* name = member(object, "name");
  if (!name) name = member(object, "tool_name");
  if (!name || !name->is_string()) return std::nullopt;
  const json* arguments = member(object, "arguments");
  if (!arguments) arguments = member(object, "parameters");
  std::optional<std::string> args = arguments_text(arguments);
  if (!args) return std::nullopt;
  return ToolCall{"", name->get<std::string>(), *args};
}

// A JSON value holding one call object or an array of them.
bool append_calls(const json& value, std::vector<ToolCall>& calls) {
  if (value.is_array()) {
    if (value.empty()) return false;
    for (const json& item : value) {
      if (!append_calls(item, calls) || item.is_array()) return false;
    }
    return true;
  }
  std::optional<ToolCall> call = call_from_object(value);
  if (!call) return false;
  calls.push_back(std::move(*call));
  return true;
}

// JSON values (objects or arrays of call objects) one after another until `end` (or until the
// text ends when `end` is empty); at least one.
bool json_calls_until(Cursor& c, std::string_view end, std::vector<ToolCall>& calls) {
  bool any = false;
  for (;;) {
    c.skip_space();
    while (c.eat(";")) c.skip_space();  // Llama 3.2 separates calls with ';'
    if (end.empty() ? c.pos == c.s.size() : c.eat(end)) return any;
    std::optional<json> value = c.json_value();
    if (!value || !append_calls(*value, calls)) return false;
    any = true;
  }
}

// <begin>json...<end>, repeated while another <begin> follows.
bool tagged_json_blocks(Cursor& c, std::string_view begin, std::string_view end,
                        std::vector<ToolCall>& calls) {
  do {
    if (!c.eat(begin) || !json_calls_until(c, end, calls)) return false;
    c.skip_space();
  } while (c.at(begin));
  return true;
}

// The schema of one property of a tool's parameters (null when unknown).
const json* property_schema(const json& tools, const std::string& function,
                            const std::string& key) {
  for (const json& tool : tools) {
    const json& f = tool["function"];
    if (f.value("name", "") != function) continue;
    const json* parameters = member(f, "parameters");
    if (!parameters || !parameters->is_object()) return nullptr;
    const json* properties = member(*parameters, "properties");
    if (!properties || !properties->is_object()) return nullptr;
    return member(*properties, key.c_str());
  }
  return nullptr;
}

bool schema_allows_string(const json* schema) {
  if (!schema || !schema->is_object()) return false;
  const json* type = member(*schema, "type");
  if (!type) return false;
  if (type->is_string()) return *type == "string";
  if (type->is_array()) {
    for (const json& t : *type)
      if (t == "string") return true;
  }
  return false;
}

// The XML formats write values as text: a string parameter is the text itself, any other a
// JSON value (text that is not JSON stays a string).
json typed_value(const json& tools, const std::string& function, const std::string& key,
                 std::string_view text) {
  if (schema_allows_string(property_schema(tools, function, key))) return std::string(text);
  json value = json::parse(text, nullptr, false);
  return value.is_discarded() ? json(std::string(text)) : value;
}

std::string_view strip_one_newline(std::string_view s) {
  if (s.starts_with('\n')) s.remove_prefix(1);
  if (s.ends_with('\n')) s.remove_suffix(1);
  return s;
}

// The XML formats also take Hermes' JSON inside <tool_call>: what a forced call is constrained to
// (tool_call_constraint.h), since a JSON schema cannot describe their XML.
bool hermes_json_block(Cursor& c, std::vector<ToolCall>& calls) {
  if (!json_calls_until(c, "</tool_call>", calls)) return false;
  c.skip_space();
  return true;
}

bool qwen_xml_calls(Cursor& c, const json& tools, std::vector<ToolCall>& calls) {
  do {
    if (!c.eat("<tool_call>")) return false;
    c.skip_space();
    if (c.at("{")) {
      if (!hermes_json_block(c, calls)) return false;
      continue;
    }
    if (!c.eat("<function=")) return false;
    std::optional<std::string_view> name = c.until(">");
    if (!name) return false;
    json arguments = json::object();
    for (;;) {
      c.skip_space();
      if (!c.eat("<parameter=")) break;
      std::optional<std::string_view> key = c.until(">");
      std::optional<std::string_view> value = c.until("</parameter>");
      if (!key || !value) return false;
      arguments[std::string(*key)] =
          typed_value(tools, std::string(*name), std::string(*key), strip_one_newline(*value));
    }
    if (!c.eat("</function>")) return false;
    c.skip_space();
    if (!c.eat("</tool_call>")) return false;
    calls.push_back({"", std::string(*name), compact(arguments)});
    c.skip_space();
  } while (c.at("<tool_call>"));
  return true;
}

bool glm_xml_calls(Cursor& c, const json& tools, std::vector<ToolCall>& calls) {
  do {
    if (!c.eat("<tool_call>")) return false;
    c.skip_space();
    if (c.at("{")) {
      if (!hermes_json_block(c, calls)) return false;
      continue;
    }
    const size_t name_end = std::min(c.s.find("<arg_key>", c.pos), c.s.find("</tool_call>", c.pos));
    if (name_end == std::string_view::npos) return false;
    const std::string name(trim(c.s.substr(c.pos, name_end - c.pos)));
    c.pos = name_end;
    json arguments = json::object();
    for (;;) {
      c.skip_space();
      if (!c.eat("<arg_key>")) break;
      std::optional<std::string_view> key = c.until("</arg_key>");
      c.skip_space();
      if (!key || !c.eat("<arg_value>")) return false;
      std::optional<std::string_view> value = c.until("</arg_value>");
      if (!value) return false;
      arguments[std::string(*key)] = typed_value(tools, name, std::string(*key), *value);
    }
    if (!c.eat("</tool_call>")) return false;
    calls.push_back({"", name, compact(arguments)});
    c.skip_space();
  } while (c.at("<tool_call>"));
  return true;
}

// One JSON object as a call's arguments.
bool append_named_call(std::string_view name, Cursor& c, std::vector<ToolCall>& calls) {
  std::optional<json> arguments = c.json_value();
  if (!arguments || !arguments->is_object()) return false;
  calls.push_back({"", std::string(trim(name)), compact(*arguments)});
  return true;
}

bool mistral_calls(Cursor& c, std::vector<ToolCall>& calls) {
  do {
    if (!c.eat("[TOOL_CALLS]")) return false;
    c.skip_space();
    if (c.at("[") || c.at("{")) {  // the older form: a JSON array of call objects
      std::optional<json> value = c.json_value();
      if (!value || !append_calls(*value, calls)) return false;
    } else {
      const size_t args = c.s.find("[ARGS]", c.pos);
      if (args == std::string_view::npos) return false;
      std::string_view name = c.s.substr(c.pos, args - c.pos);
      if (size_t id = name.find("[CALL_ID]"); id != std::string_view::npos)
        name = name.substr(0, id);
      c.pos = args + 6;
      if (!append_named_call(name, c, calls)) return false;
    }
    c.skip_space();
  } while (c.at("[TOOL_CALLS]"));
  return true;
}

bool deepseek_calls(Cursor& c, std::vector<ToolCall>& calls) {
  const bool section = c.eat("<｜tool▁calls▁begin｜>");
  c.skip_space();
  do {
    if (!c.eat("<｜tool▁call▁begin｜>")) return false;
    std::optional<std::string_view> head = c.until("<｜tool▁sep｜>");
    if (!head) return false;
    if (*head == "function") {  // R1: the type, then the name on its own line, then ```json
      std::optional<std::string_view> name = c.until("\n");
      if (!name) return false;
      c.skip_space();
      c.eat("```json");
      if (!append_named_call(*name, c, calls)) return false;
      c.skip_space();
      c.eat("```");
    } else if (!append_named_call(*head, c, calls)) {
      return false;
    }
    c.skip_space();
    if (!c.eat("<｜tool▁call▁end｜>")) return false;
    c.skip_space();
  } while (c.at("<｜tool▁call▁begin｜>"));
  if (section && !c.eat("<｜tool▁calls▁end｜>")) return false;
  return true;
}

bool kimi_calls(Cursor& c, std::vector<ToolCall>& calls) {
  const bool section = c.eat("<|tool_calls_section_begin|>");
  c.skip_space();
  do {
    if (!c.eat("<|tool_call_begin|>")) return false;
    std::optional<std::string_view> id = c.until("<|tool_call_argument_begin|>");
    if (!id) return false;
    // The id is "functions.NAME:INDEX".
    std::string_view name = trim(*id);
    if (name.starts_with("functions.")) name.remove_prefix(10);
    if (size_t colon = name.rfind(':'); colon != std::string_view::npos) {
      name = name.substr(0, colon);
    }
    if (!append_named_call(name, c, calls)) return false;
    c.skip_space();
    if (!c.eat("<|tool_call_end|>")) return false;
    c.skip_space();
  } while (c.at("<|tool_call_begin|>"));
  if (section && !c.eat("<|tool_calls_section_end|>")) return false;
  return true;
}

bool section_calls(ToolCallFormat format, Cursor& c, const json& tools,
                   std::vector<ToolCall>& calls) {
  switch (format) {
    case ToolCallFormat::Hermes:
      return tagged_json_blocks(c, "<tool_call>", "</tool_call>", calls);
    case ToolCallFormat::ToolCallsTag:
      return tagged_json_blocks(c, "<tool_calls>", "</tool_calls>", calls);
    case ToolCallFormat::CohereAction:
      return tagged_json_blocks(c, "<|START_ACTION|>", "<|END_ACTION|>", calls);
    case ToolCallFormat::QwenXml:
      return qwen_xml_calls(c, tools, calls);
    case ToolCallFormat::GlmXml:
      return glm_xml_calls(c, tools, calls);
    case ToolCallFormat::Llama3Json:
      c.eat("<|python_tag|>");
      return json_calls_until(c, "", calls);
    case ToolCallFormat::Firefunction: {
      c.eat(" ");
      if (!c.eat("functools")) return false;
      std::optional<json> value = c.json_value();
      return value && value->is_array() && append_calls(*value, calls);
    }
    case ToolCallFormat::Mistral:
      return mistral_calls(c, calls);
    case ToolCallFormat::DeepSeek:
      return deepseek_calls(c, calls);
    case ToolCallFormat::KimiK2:
      return kimi_calls(c, calls);
  }
  return false;
}

bool all_offered(const std::vector<ToolCall>& calls, const json& tools) {
  std::set<std::string> names;
  for (const json& tool : tools) names.insert(tool["function"].value("name", ""));
  for (const ToolCall& call : calls) {
    if (!names.count(call.name)) return false;
  }
  return true;
}

}  // namespace

size_t find_tool_call_start(ToolCallFormat format, std::string_view text, bool at_beginning) {
  size_t first = std::string_view::npos;
  for (const ToolCallStart& start : tool_call_starts(format)) {
    size_t pos;
    if (start.only_at_beginning) {
      if (!at_beginning) continue;
      const std::string_view rest = trim(text);
      if (!rest.starts_with(start.marker)) continue;
      pos = static_cast<size_t>(rest.data() - text.data());
    } else {
      pos = text.find(start.marker);
    }
    first = std::min(first, pos);
  }
  return first;
}

std::optional<ToolCallSection> parse_tool_call_section(ToolCallFormat format,
                                                       std::string_view section,
                                                       const json& tools) {
  Cursor c{section};
  ToolCallSection out;
  if (!section_calls(format, c, tools, out.calls) || out.calls.empty() ||
      !all_offered(out.calls, tools)) {
    return std::nullopt;
  }
  out.trailing = c.rest();
  return out;
}

std::string content_around_calls(std::string_view before, std::string_view after) {
  while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
  return std::string(before) + std::string(trim(after));
}

ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text, const json& tools) {
  ToolCallParse out;
  const size_t start = find_tool_call_start(format, text, true);
  std::optional<ToolCallSection> section;
  if (start != std::string_view::npos) {
    section = parse_tool_call_section(format, text.substr(start), tools);
  }
  if (!section) {
    out.content = std::string(text);
    return out;
  }
  out.content = content_around_calls(text.substr(0, start), section->trailing);
  out.calls = std::move(section->calls);
  return out;
}

}  // namespace k25
