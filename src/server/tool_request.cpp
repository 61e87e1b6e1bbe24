#include "server/tool_request.h"

#include <set>

#include "core/error.h"
#include "server/api_error.h"

namespace k25 {

using nlohmann::json;

namespace {

const json* field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void bad_tools(const std::string& message) {
  throw_bad_request("tools: " + message, "tools", "invalid_value");
}

// OpenAI's rule for function names; it also keeps names safe inside every call format.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void check_tool(const json& tool, size_t index, std::set<std::string>& names) {
  const std::string where = concat("tools[", index, "]");
  if (!tool.is_object()) bad_tools(where + " must be an object");
  if (const json* type = field(tool, "type"); type && *type != "function") {
    bad_tools(where + ".type must be \"function\"");
  }
  const json* function = field(tool, "function");
  if (!function || !function->is_object()) bad_tools(where + ".function must be an object");
  const json* name = field(*function, "name");
  if (!name) bad_tools(where + ".function.name is required");
  if (!name->is_string() || !valid_function_name(name->get<std::string>())) {
    bad_tools(where + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-', got " +
              name->dump());
  }
  if (!names.insert(name->get<std::string>()).second) {
    bad_tools(concat("two tools are named '", name->get<std::string>(), "'"));
  }
  if (const json* description = field(*function, "description");
      description && !description->is_string()) {
    bad_tools(where + ".function.description must be a string");
  }
  if (const json* strict = field(*function, "strict"); strict && !strict->is_boolean()) {
    bad_tools(where + ".function.strict must be true or false");
  }
  if (const json* parameters = field(*function, "parameters")) {
    if (!parameters->is_object()) {
      bad_tools(where + ".function.parameters must be a JSON schema object");
    }
    if (const json* type = field(*parameters, "type"); type && *type != "object") {
      bad_tools(where + ".function.parameters must be a schema of type \"object\", got type " +
                type->dump());
    }
  }
}

[[noreturn]] void bad_tool_choice(const std::string& message) {
  throw_bad_request("tool_choice: " + message, "tool_choice", "invalid_value");
}

void parse_tool_choice(const json& choice, ToolRequest& out, const std::set<std::string>& names) {
  if (choice.is_string()) {
    const std::string mode = choice.get<std::string>();
    if (mode == "auto") {
      out.choice = ToolChoiceMode::Auto;
    } else if (mode == "none") {
      out.choice = ToolChoiceMode::None;
    } else if (mode == "required") {
      out.choice = ToolChoiceMode::Required;
    } else {
      bad_tool_choice("expected \"auto\", \"none\", \"required\" or a function, got \"" + mode +
                      "\"");
    }
  } else if (choice.is_object()) {
    if (const json* type = field(choice, "type"); !type || *type != "function") {
      bad_tool_choice("an object must have \"type\": \"function\"");
    }
    const json* function = field(choice, "function");
    const json* name = function && function->is_object() ? field(*function, "name") : nullptr;
    if (!name || !name->is_string()) bad_tool_choice("function.name must be a string");
    out.choice = ToolChoiceMode::Named;
    out.forced_name = name->get<std::string>();
    if (!names.count(out.forced_name)) {
      bad_tool_choice("names the function '" + out.forced_name + "', which is not in 'tools'");
    }
  } else {
    bad_tool_choice("expected a string or an object");
  }
  if ((out.choice == ToolChoiceMode::Required || out.choice == ToolChoiceMode::Named) &&
      out.tools.empty()) {
    bad_tool_choice("a required tool call needs 'tools'");
  }
}

[[noreturn]] void bad_message(const std::string& message) {
  throw_bad_request("messages: " + message, "messages", "invalid_value");
}

void check_assistant_calls(const json& calls, size_t index, std::set<std::string>& issued) {
  const std::string where = concat("messages[", index, "].tool_calls");
  if (!calls.is_array()) bad_message(where + " must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    const std::string at = concat(where, "[", i, "]");
    if (!call.is_object()) bad_message(at + " must be an object");
    const json* id = field(call, "id");
    if (!id || !id->is_string() || id->get<std::string>().empty()) {
      bad_message(at + ".id must be a non-empty string");
    }
    if (const json* type = field(call, "type"); type && *type != "function") {
      bad_message(at + ".type must be \"function\"");
    }
    const json* function = field(call, "function");
    if (!function || !function->is_object()) bad_message(at + ".function must be an object");
    const json* name = field(*function, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty()) {
      bad_message(at + ".function.name must be a non-empty string");
    }
    const json* arguments = field(*function, "arguments");
    if (!arguments || !(arguments->is_string() || arguments->is_object())) {
      bad_message(at + ".function.arguments must be a JSON string or an object");
    }
    issued.insert(id->get<std::string>());
  }
}

}  // namespace

ToolRequest parse_tool_request(const json& body) {
  ToolRequest out;
  std::set<std::string> names;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) bad_tools("must be an array of {\"type\": \"function\", ...}");
    for (size_t i = 0; i < tools->size(); ++i) check_tool((*tools)[i], i, names);
    out.tools = *tools;
  }
  if (const json* choice = field(body, "tool_choice")) parse_tool_choice(*choice, out, names);
  if (const json* parallel = field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) {
      throw_bad_request("'parallel_tool_calls' must be true or false", "parallel_tool_calls",
                        "invalid_type");
    }
    out.parallel = parallel->get<bool>();
  }
  return out;
}

void check_tool_messages(const json& messages) {
  std::set<std::string> issued;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const json* role = field(m, "role");
    if (!role || !role->is_string()) continue;  // reported by the message parser
    if (*role == "assistant") {
      if (const json* calls = field(m, "tool_calls")) check_assistant_calls(*calls, i, issued);
    } else if (*role == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) {
        bad_message(concat("messages[", i, "] (role 'tool') needs a string 'tool_call_id'"));
      }
      if (!issued.count(id->get<std::string>())) {
        bad_message(concat("messages[", i, "] answers tool call '", id->get<std::string>(),
                           "', which no earlier assistant message made"));
      }
    }
  }
}

}  // namespace k25
