#include "server/anthropic_request.h"

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/speculative_field.h"

namespace k25 {

using nlohmann::json;

namespace {

// A string, or an array of {"type": "text", "text": …} blocks (joined). `where` names the field
// in errors.
std::string text_of(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw_bad_request(concat(where, ": must be a string or an array of content blocks"), where,
                      "invalid_type");
  }
  std::string text;
  for (const json& block : content) {
    if (!block.is_object() || !block.contains("type") || !block["type"].is_string()) {
      throw_bad_request(concat(where, ": every content block needs a string 'type'"), where,
                        "invalid_value");
    }
    const std::string type = block["type"].get<std::string>();
    if (type != "text") {
      throw_bad_request(concat(where, ": content blocks of type '", type,
                               "' are not supported (only text; tool use and images are not "
                               "served on /v1/messages)"),
                        where, "unsupported_value");
    }
    const json* t = field(block, "text");
    if (!t || !t->is_string()) {
      throw_bad_request(concat(where, ": a text block needs a string 'text'"), where,
                        "invalid_value");
    }
    text += t->get<std::string>();
  }
  return text;
}

// One message in the shape the chat template reads (role, then string content).
nlohmann::ordered_json chat_message(const std::string& role, std::string content) {
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  m["role"] = role;
  m["content"] = std::move(content);
  return m;
}

void get_conversation(const json& body, ParsedRequest& out) {
  out.messages = nlohmann::ordered_json::array();
  if (const json* system = field(body, "system")) {
    out.messages.push_back(chat_message("system", text_of(*system, "system")));
  }
  const json* v = field(body, "messages");
  if (!v) throw_bad_request("messages: Field required", "messages", "missing_field");
  if (!v->is_array()) wrong_type("messages", "an array of messages");
  if (v->empty()) {
    throw_bad_request("messages: at least one message is required", "messages", "invalid_value");
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = concat("messages.", i);
    if (!m.is_object()) wrong_type("messages", "an array of objects");
    const json* role = field(m, "role");
    if (!role || !role->is_string() ||
        (role->get<std::string>() != "user" && role->get<std::string>() != "assistant")) {
      throw_bad_request(concat(where, ".role: must be \"user\" or \"assistant\""), "messages",
                        "invalid_value");
    }
    const json* content = field(m, "content");
    if (!content) {
      throw_bad_request(concat(where, ".content: Field required"), "messages", "missing_field");
    }
    out.messages.push_back(
        chat_message(role->get<std::string>(), text_of(*content, where + ".content")));
  }
  // A last assistant message is the start of the answer (prefill).
  if (out.messages.back()["role"] == "assistant") {
    out.assistant_prefill = out.messages.back()["content"].get<std::string>();
    out.messages.erase(out.messages.end() - 1);
  }
  if (const json* tools = field(body, "tools"); tools && !(tools->is_array() && tools->empty())) {
    throw_bad_request("tools: tool use is not supported on /v1/messages (use /v1/chat/completions)",
                      "tools", "unsupported_value");
  }
}

std::vector<std::string> get_stop_sequences(const json& body, int max_count) {
  std::vector<std::string> stops;
  const json* v = field(body, "stop_sequences");
  if (!v) return stops;
  if (!v->is_array()) wrong_type("stop_sequences", "an array of strings");
  for (const json& s : *v) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      wrong_type("stop_sequences", "an array of non-empty strings");
    }
    stops.push_back(s.get<std::string>());
  }
  if (static_cast<int>(stops.size()) > max_count) {
    throw_bad_request(concat("stop_sequences: at most ", max_count, " strings"), "stop_sequences",
                      "out_of_range");
  }
  return stops;
}

json parse_object(std::string_view text) {
  json body = parse_json_body(text);
  if (!body.is_object()) {
    throw_bad_request("the request body must be a JSON object", "", "invalid_json");
  }
  return body;
}

}  // namespace

ParsedRequest parse_messages_body(std::string_view text, const RequestDefaults& defaults) {
  const json body = parse_object(text);
  ParsedRequest out;
  out.flavor = ApiFlavor::Messages;
  get_conversation(body, out);
  out.model = get_string(body, "model", "");
  if (!field(body, "max_tokens")) {
    throw_bad_request("max_tokens: Field required", "max_tokens", "missing_field");
  }
  out.max_tokens = static_cast<int>(get_int(body, "max_tokens", 0, 1, defaults.context_size));
  SamplingParams& p = out.sampling;
  p = defaults.sampling;
  // Anthropic's ranges: temperature in [0, 1].
  p.temperature = static_cast<float>(get_number(body, "temperature", p.temperature, 0.0, 1.0));
  p.top_p = static_cast<float>(get_number(body, "top_p", p.top_p, 0.0, 1.0));
  p.top_k = static_cast<int>(get_int(body, "top_k", p.top_k, 0, 1'000'000));
  out.stop = get_stop_sequences(body, defaults.max_stop_strings);
  out.stream = get_bool(body, "stream", false);
  out.speculative = get_speculative(body);
  if (const json* metadata = field(body, "metadata")) {
    if (!metadata->is_object()) wrong_type("metadata", "an object");
    out.session_id = get_string(*metadata, "user_id", "");
  }
  return out;
}

ParsedRequest parse_count_tokens_body(std::string_view text, const RequestDefaults&) {
  const json body = parse_object(text);
  ParsedRequest out;
  out.flavor = ApiFlavor::Messages;
  get_conversation(body, out);
  out.model = get_string(body, "model", "");
  return out;
}

}  // namespace k25
