#include "server/request_parsing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/json_nesting.h"
#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/grammar_request.h"
#include "server/json_fields.h"
#include "server/speculative_field.h"

namespace k25 {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;

// nlohmann builds nested values recursively; refuse deep nesting before it gets the chance.
void check_depth(std::string_view body) {
  JsonNesting nesting;
  for (char c : body) {
    if (nesting.step(c) > kMaxJsonDepth) {
      throw_bad_request(concat("malformed JSON: nested deeper than ", kMaxJsonDepth, " levels"), "",
                        "invalid_json");
    }
  }
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

// OpenAI's {"<token id>": bias}: canonical decimal ids (so no id appears twice), biases in
// [-100, 100].
std::vector<std::pair<TokenId, float>> get_logit_bias(const json& body, int n_vocab) {
  const json* v = field(body, "logit_bias");
  std::vector<std::pair<TokenId, float>> biases;
  if (!v) return biases;
  if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to numbers");
  int banned = 0;
  for (const auto& [key, value] : v->items()) {
    const bool canonical =
        !key.empty() && key.size() <= 10 &&
        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        (key == "0" || key[0] != '0');
    const int64_t id = canonical ? std::stoll(key) : -1;
    if (id < 0 || id > std::numeric_limits<TokenId>::max() || (n_vocab > 0 && id >= n_vocab)) {
      throw_bad_request(
          concat("logit_bias: '", key, "' is not a token id (vocabulary size ", n_vocab, ")"),
          "logit_bias", "invalid_value");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100 ||
        value.get<double>() > 100) {
      throw_bad_request(
          concat("logit_bias: the bias of token ", key, " must be a number in [-100, 100]"),
          "logit_bias", "invalid_value");
    }
    const auto bias = static_cast<float>(value.get<double>());
    if (bias <= -100.0f) ++banned;
    biases.emplace_back(static_cast<TokenId>(id), bias);
  }
  if (n_vocab > 0 && banned == n_vocab) {
    throw_bad_request("logit_bias bans every token of the vocabulary", "logit_bias",
                      "invalid_value");
  }
  return biases;
}

SamplingParams get_sampling(const json& body, const RequestDefaults& d) {
  SamplingParams p = d.sampling;
  p.temperature = static_cast<float>(get_number(body, "temperature", p.temperature, 0.0, 10.0));
  p.top_p = static_cast<float>(get_number(body, "top_p", p.top_p, 0.0, 1.0));
  p.top_k = static_cast<int>(get_int(body, "top_k", p.top_k, 0, 1'000'000));
  p.min_p = static_cast<float>(get_number(body, "min_p", p.min_p, 0.0, 1.0));
  p.repeat_penalty =
      static_cast<float>(get_number(body, "repeat_penalty", p.repeat_penalty, 0.01, 10.0));
  p.presence_penalty =
      static_cast<float>(get_number(body, "presence_penalty", p.presence_penalty, -2.0, 2.0));
  p.frequency_penalty =
      static_cast<float>(get_number(body, "frequency_penalty", p.frequency_penalty, -2.0, 2.0));
  p.logit_bias = get_logit_bias(body, d.n_vocab);
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) wrong_type("seed", "an integer");
    // Negative seeds are valid OpenAI values; their two's-complement bits seed the RNG.
    p.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  return p;
}

// 0 when absent; resolve_max_tokens applies the default once the prompt is known.
void get_max_tokens(const json& body, const RequestDefaults& d, const char* name,
                    ParsedRequest& out) {
  if (!field(body, name)) return;
  out.max_tokens = static_cast<int>(get_int(body, name, 0, 1, d.context_size));
  out.max_tokens_field = name;
}

// OpenAI's n, and completions' best_of, which k25 supports only equal to n (every choice it
// generates is returned).
void get_choices(const json& body, const RequestDefaults& d, ParsedRequest& out) {
  out.n = static_cast<int>(get_int(body, "n", 1, 1, d.max_choices));
  if (out.flavor == ApiFlavor::Completions &&
      get_int(body, "best_of", out.n, 1, std::numeric_limits<int64_t>::max()) != out.n) {
    throw_bad_request("'best_of' must equal 'n': k25 returns every choice it generates", "best_of",
                      "unsupported_value");
  }
}

// The chat fields, re-read in their key order (json sorts object keys; templates print them).
void get_chat_fields(std::string_view text, const json& body, ParsedRequest& out) {
  if (!field(body, "messages"))
    throw_bad_request("'messages' is required", "messages", "missing_field");
  // The tool checks first: their messages name the exact index and field.
  if (const json* messages = field(body, "messages"); messages->is_array()) {
    check_tool_messages(*messages);
  }
  out.tools = parse_tool_request(body);
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  out.messages = ordered["messages"];
  validate_chat_messages(out.messages);
  if (ordered.contains("tools")) out.tool_specs = ordered["tools"];
  validate_chat_tools(out.tool_specs);
  if (ordered.contains("chat_template_kwargs") && !ordered["chat_template_kwargs"].is_null()) {
    out.chat_template_kwargs = ordered["chat_template_kwargs"];
    if (!out.chat_template_kwargs.is_object()) wrong_type("chat_template_kwargs", "an object");
  }
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
    get_chat_fields(text, body, out);
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
  out.speculative = get_speculative(body);
  out.ignore_eos = get_bool(body, "ignore_eos", false);
  out.grammar = parse_grammar_fields(flavor, body, text);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) wrong_type("stream_options", "an object");
    out.include_usage = get_bool(*options, "include_usage", false);
  }
  switch (flavor) {
    case ApiFlavor::Generate:
      get_max_tokens(body, defaults, "max_tokens", out);
      out.session_id = get_string(body, "session_id", "");
      break;
    case ApiFlavor::Completions:
      get_max_tokens(body, defaults, "max_tokens", out);
      out.session_id = get_string(body, "user", "");
      get_choices(body, defaults, out);
      out.top_logprobs =
          static_cast<int>(get_int(body, "logprobs", -1, 0, defaults.max_top_logprobs));
      break;
    case ApiFlavor::Chat: {
      // max_completion_tokens is the newer name; either may be given, it wins.
      get_max_tokens(body, defaults, "max_tokens", out);
      get_max_tokens(body, defaults, "max_completion_tokens", out);
      out.session_id = get_string(body, "user", "");
      get_choices(body, defaults, out);
      const bool logprobs = get_bool(body, "logprobs", false);
      const int top =
          static_cast<int>(get_int(body, "top_logprobs", 0, 0, defaults.max_top_logprobs));
      if (field(body, "top_logprobs") && !logprobs) {
        throw_bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
      }
      out.top_logprobs = logprobs ? top : -1;
      break;
    }
    case ApiFlavor::Messages:
      fail("parse_request_body: Anthropic bodies are parsed by parse_messages_body");
  }
  return out;
}

int resolve_max_tokens(const ParsedRequest& request, const RequestDefaults& defaults,
                       int n_prompt) {
  const int room = defaults.context_size - n_prompt;
  if (request.max_tokens == 0)
    return defaults.max_tokens > 0 ? std::min(defaults.max_tokens, room) : room;
  if (request.max_tokens > room) {
    throw_bad_request(
        concat("'", request.max_tokens_field, "' is ", request.max_tokens,
               ", but the context holds ", defaults.context_size, " tokens and the prompt has ",
               n_prompt, ": at most ", room, " can be generated"),
        request.max_tokens_field, "context_length_exceeded");
  }
  return request.max_tokens;
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
