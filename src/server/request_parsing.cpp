#include "server/request_parsing.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/grammar_request.h"
#include "util/error.h"

namespace k25 {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;

// nlohmann builds nested values recursively; refuse deep nesting before it gets the chance.
void check_depth(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw_bad_request(concat("malformed JSON: nested deeper than ", kMaxJsonDepth, " levels"),
                          "", "invalid_json");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// Field access: a field that is absent or null takes the default.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

[[noreturn]] void wrong_type(const char* name, const char* expected) {
  throw_bad_request(concat("'", name, "' must be ", expected), name, "invalid_type");
}

int64_t get_int(const json& body, const char* name, int64_t fallback, int64_t min, int64_t max) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer()) wrong_type(name, "an integer");
  // Unsigned values above int64 range are out of range either way.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max), name,
                      "out_of_range");
  }
  int64_t n = v->get<int64_t>();
  if (n < min || n > max) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max, ", got ", n), name,
                      "out_of_range");
  }
  return n;
}

double get_number(const json& body, const char* name, double fallback, double min, double max) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) wrong_type(name, "a number");
  double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    throw_bad_request(concat("'", name, "' must be between ", min, " and ", max), name,
                      "out_of_range");
  }
  return x;
}

bool get_bool(const json& body, const char* name, bool fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(name, "true or false");
  return v->get<bool>();
}

std::string get_string(const json& body, const char* name, std::string fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(name, "a string");
  return v->get<std::string>();
}

std::vector<std::string> get_stop(const json& body, int max_count) {
  const json* v = field(body, "stop");
  std::vector<std::string> stops;
  if (!v) return stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) wrong_type("stop", "a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings");
  }
  if (static_cast<int>(stops.size()) > max_count) {
    throw_bad_request(concat("'stop' may hold at most ", max_count, " strings"), "stop",
                      "out_of_range");
  }
  for (const std::string& s : stops) {
    if (s.empty()) throw_bad_request("'stop' strings must not be empty", "stop", "invalid_value");
  }
  return stops;
}

SamplingParams get_sampling(const json& body, const RequestDefaults& d) {
  SamplingParams p = d.sampling;
  p.temperature = static_cast<float>(get_number(body, "temperature", p.temperature, 0.0, 10.0));
  p.top_p = static_cast<float>(get_number(body, "top_p", p.top_p, 0.0, 1.0));
  p.top_k = static_cast<int>(get_int(body, "top_k", p.top_k, 0, 1'000'000));
  p.min_p = static_cast<float>(get_number(body, "min_p", p.min_p, 0.0, 1.0));
  p.repeat_penalty =
      static_cast<float>(get_number(body, "repeat_penalty", p.repeat_penalty, 0.01, 10.0));
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) wrong_type("seed", "an integer");
    // Negative seeds are valid OpenAI values; their two's-complement bits seed the RNG.
    p.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return p;
}

int get_max_tokens(const json& body, const RequestDefaults& d, const char* name) {
  return static_cast<int>(get_int(body, name, d.max_tokens, 1, d.context_size));
}

void check_n_is_one(const json& body, const char* name) {
  if (get_int(body, name, 1, std::numeric_limits<int64_t>::min(),
              std::numeric_limits<int64_t>::max()) != 1) {
    throw_bad_request(concat("'", name, "' must be 1: k25 returns one choice per request"), name,
                      "unsupported_value");
  }
}

std::string message_content(const json& message) {
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) wrong_type("messages", "objects whose content is a string or parts");
  // Content parts: only text parts are understood.
  std::string text;
  for (const json& part : *content) {
    if (!part.is_object() || get_string(part, "type", "") != "text") {
      throw_bad_request("messages: only text content parts are supported", "messages",
                        "unsupported_value");
    }
    text += get_string(part, "text", "");
  }
  return text;
}

std::vector<ChatMessage> get_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw_bad_request("'messages' is required", "messages", "missing_field");
  if (!v->is_array()) wrong_type("messages", "an array of messages");
  if (v->empty()) throw_bad_request("'messages' must not be empty", "messages", "invalid_value");
  std::vector<ChatMessage> messages;
  for (const json& m : *v) {
    if (!m.is_object()) wrong_type("messages", "an array of objects");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) {
      throw_bad_request("every message needs a string 'role'", "messages", "invalid_value");
    }
    messages.push_back({role->get<std::string>(), message_content(m)});
  }
  check_tool_messages(*v);
  return messages;
}

void get_prompt(const json& body, ParsedRequest& out) {
  const json* v = field(body, "prompt");
  if (!v) throw_bad_request("'prompt' is required", "prompt", "missing_field");
  if (v->is_string()) {
    out.prompt = v->get<std::string>();
  } else if (out.flavor == ApiFlavor::Completions && v->is_array() && v->size() == 1 &&
             (*v)[0].is_string()) {
    out.prompt = (*v)[0].get<std::string>();
  } else if (out.flavor == ApiFlavor::Completions && v->is_array() && !v->empty() &&
             (*v)[0].is_number_integer()) {
    std::vector<int64_t> ids;
    for (const json& id : *v) {
      if (!id.is_number_integer()) wrong_type("prompt", "a string or an array of token ids");
      ids.push_back(id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX ? INT64_MAX
                                                                              : id.get<int64_t>());
    }
    out.prompt_ids = std::move(ids);
  } else {
    wrong_type("prompt", out.flavor == ApiFlavor::Completions
                             ? "a string, an array of one string, or an array of token ids"
                             : "a string");
  }
  if (!out.prompt_ids && out.prompt.empty()) {
    throw_bad_request("'prompt' must not be empty", "prompt", "invalid_value");
  }
}

}  // namespace

json parse_json_body(std::string_view body) {
  check_depth(body);
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    throw_bad_request(std::string("malformed JSON: ") + e.what(), "", "invalid_json");
  }
  return parsed;
}

ParsedRequest parse_request_body(ApiFlavor flavor, std::string_view text,
                                 const RequestDefaults& defaults) {
  json body = parse_json_body(text);
  if (!body.is_object())
    throw_bad_request("the request body must be a JSON object", "", "invalid_json");
  ParsedRequest out;
  out.flavor = flavor;
  if (flavor == ApiFlavor::Chat) {
    out.messages = get_messages(body);
  } else {
    get_prompt(body, out);
  }
  out.model = get_string(body, "model", "");
  out.sampling = get_sampling(body, defaults);
  out.stop = get_stop(body, defaults.max_stop_strings);
  out.stream = get_bool(body, "stream", false);
  const std::string pruning = get_string(body, "pruning", "auto");
  if (pruning != "auto" && pruning != "off") {
    throw_bad_request(concat("pruning: expected \"auto\" or \"off\", got '", pruning, "'"),
                      "pruning", "invalid_value");
  }
  out.pruning_off = pruning == "off";
  out.ignore_eos = get_bool(body, "ignore_eos", false);
  out.grammar = parse_grammar_fields(flavor, body, text);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) wrong_type("stream_options", "an object");
    out.include_usage = get_bool(*options, "include_usage", false);
  }
  switch (flavor) {
    case ApiFlavor::Generate:
      out.max_tokens = get_max_tokens(body, defaults, "max_tokens");
      out.session_id = get_string(body, "session_id", "");
      break;
    case ApiFlavor::Completions:
      out.max_tokens = get_max_tokens(body, defaults, "max_tokens");
      out.session_id = get_string(body, "user", "");
      check_n_is_one(body, "n");
      check_n_is_one(body, "best_of");
      out.top_logprobs =
          static_cast<int>(get_int(body, "logprobs", -1, 0, defaults.max_top_logprobs));
      break;
    case ApiFlavor::Chat: {
      // max_completion_tokens is the newer name; either may be given.
      RequestDefaults d = defaults;
      d.max_tokens = get_max_tokens(body, defaults, "max_tokens");
      out.max_tokens = get_max_tokens(body, d, "max_completion_tokens");
      out.session_id = get_string(body, "user", "");
      check_n_is_one(body, "n");
      const bool logprobs = get_bool(body, "logprobs", false);
      const int top =
          static_cast<int>(get_int(body, "top_logprobs", 0, 0, defaults.max_top_logprobs));
      if (field(body, "top_logprobs") && !logprobs) {
        throw_bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
      }
      out.top_logprobs = logprobs ? top : -1;
      out.tools = parse_tool_request(body);
      break;
    }
  }
  return out;
}

TokenizeRequest parse_tokenize_body(std::string_view text) {
  json body = parse_json_body(text);
  if (!body.is_object())
    throw_bad_request("the request body must be a JSON object", "", "invalid_json");
  TokenizeRequest out;
  const json* content = field(body, "content");
  if (!content) throw_bad_request("'content' is required", "content", "missing_field");
  if (!content->is_string()) wrong_type("content", "a string");
  out.content = content->get<std::string>();
  out.add_special = get_bool(body, "add_special", false);
  return out;
}

std::vector<int32_t> parse_detokenize_body(std::string_view text, int n_vocab) {
  json body = parse_json_body(text);
  if (!body.is_object())
    throw_bad_request("the request body must be a JSON object", "", "invalid_json");
  const json* tokens = field(body, "tokens");
  if (!tokens) throw_bad_request("'tokens' is required", "tokens", "missing_field");
  if (!tokens->is_array()) wrong_type("tokens", "an array of token ids");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) wrong_type("tokens", "an array of token ids");
    if (t.is_number_unsigned() ? t.get<uint64_t>() >= static_cast<uint64_t>(n_vocab)
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)) {
      throw_bad_request(
          concat("'tokens': ", t.dump(), " is not a token id (vocabulary size ", n_vocab, ")"),
          "tokens", "out_of_range");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

}  // namespace k25
