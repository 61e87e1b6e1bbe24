#include "server/chat_messages.h"

#include <string>

#include "core/error.h"
#include "server/api_error.h"

namespace k25 {

namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad_message(const std::string& what) {
  throw_bad_request("messages: " + what, "messages", "invalid_value");
}

}  // namespace

void validate_chat_messages(const ojson& messages) {
  if (!messages.is_array())
    throw_bad_request("'messages' must be an array of messages", "messages", "invalid_type");
  if (messages.empty())
    throw_bad_request("'messages' must not be empty", "messages", "invalid_value");
  for (const ojson& m : messages) {
    if (!m.is_object()) bad_message("every message must be an object");
    if (!m.contains("role") || !m["role"].is_string())
      bad_message("every message needs a string 'role'");
    if (m.contains("content")) {
      const ojson& c = m["content"];
      if (c.is_array()) {
        for (const ojson& part : c) {
          if (!part.is_object() || !part.contains("type") || part["type"] != "text") {
            throw_bad_request("messages: only text content parts are supported", "messages",
                              "unsupported_value");
          }
          if (!part.contains("text") || !part["text"].is_string())
            bad_message("a text part needs a string 'text'");
        }
      } else if (!c.is_string() && !c.is_null()) {
        bad_message("'content' must be a string, null or an array of text parts");
      }
    }
    for (const char* key : {"name", "tool_call_id"}) {
      if (m.contains(key) && !m[key].is_string())
        bad_message(concat("'", key, "' must be a string"));
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_string() &&
        !m["reasoning_content"].is_null()) {
      bad_message("'reasoning_content' must be a string or null");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) bad_message("'tool_calls' must be an array");
      for (const ojson& call : m["tool_calls"]) {
        if (!call.is_object()) bad_message("every tool call must be an object");
        if (call.contains("function") && !call["function"].is_object())
          bad_message("a tool call's 'function' must be an object");
      }
    }
  }
}

void validate_chat_tools(const ojson& tools) {
  if (tools.is_null()) return;
  if (!tools.is_array()) throw_bad_request("'tools' must be an array", "tools", "invalid_type");
  for (const ojson& t : tools) {
    if (!t.is_object()) throw_bad_request("every tool must be an object", "tools", "invalid_type");
  }
}

}  // namespace k25
