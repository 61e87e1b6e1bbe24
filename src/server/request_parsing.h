// Request bodies of /generate, /v1/completions, /v1/chat/completions, /tokenize and /detokenize:
// JSON in, validated parameters out. Every problem is an ApiException (400) naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/sampler.h"
#include "server/tool_request.h"

namespace k25 {

// Messages: Anthropic's /v1/messages (parsed by anthropic_request.h, rendered like Chat).
enum class ApiFlavor { Generate, Completions, Chat, Messages };

// What a request gets for the fields it leaves out, and the bounds on what it may ask.
struct RequestDefaults {
  SamplingParams sampling;  // temperature, top_k, top_p, min_p, repeat_penalty
  int max_tokens = 0;  // > 0: the default for a request without one; 0: the rest of the context
  int context_size = 2048;  // max_tokens above this is rejected
  int n_vocab = 0;          // > 0: logit_bias keys are checked against it
  int max_top_logprobs = 20;
  int max_stop_strings = 16;
  int max_choices = 16;  // the bound on OpenAI's `n`: each choice is its own engine request
};

struct ParsedRequest {
  ApiFlavor flavor = ApiFlavor::Generate;
  std::string prompt;                              // text prompt (Generate, Completions)
  std::optional<std::vector<int64_t>> prompt_ids;  // Completions: prompt given as token ids
  // Chat: the request's messages and tools as sent (object key order kept: the template's tojson
  // shows it), tool_specs null when absent, and chat_template_kwargs (extra template variables).
  // Messages (Anthropic) converts its conversation to the same shape.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tool_specs;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Messages: the text of a last assistant message, which the answer continues (Anthropic's
  // prefill); it follows the rendered conversation and is not repeated in the answer.
  std::string assistant_prefill;
  std::string model;
  int max_tokens = 0;                           // 0: not given (see resolve_max_tokens)
  std::string max_tokens_field = "max_tokens";  // the field it came from, for errors
  int n = 1;                                    // OpenAI's n: independent choices
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // "ignore_eos": true (llama.cpp's extension, for benchmarks)
  int top_logprobs = -1;       // < 0: no logprobs
  // R-KV4: /generate's "session_id", OpenAI's "user" (the server also reads x-session-id).
  std::string session_id;
  bool pruning_off = false;  // "pruning": "off" (R-PR5: the request runs the full model)
  std::string speculative;   // "speculative": off, ngram, auto; "": the server's default
  // Constrained decoding (server/grammar_request.h): response_format, or /generate's "grammar"
  // and "json_schema", as GBNF text. "": unconstrained.
  std::string grammar;
  ToolRequest tools;  // Chat: tools, tool_choice, parallel_tool_calls
};

// Throws ApiException on malformed JSON (including invalid UTF-8 and nesting deeper than 64).
nlohmann::json parse_json_body(std::string_view body);

ParsedRequest parse_request_body(ApiFlavor flavor, std::string_view body,
                                 const RequestDefaults& defaults);

// The tokens a request may generate once its prompt is known: an omitted max_tokens means the
// server default or, without one, the rest of the context (a default is cut to what fits); an
// explicit value that does not fit beside the prompt is a 400 (context_length_exceeded), as
// OpenAI and Anthropic answer.
int resolve_max_tokens(const ParsedRequest& request, const RequestDefaults& defaults, int n_prompt);

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
};
TokenizeRequest parse_tokenize_body(std::string_view body);

// Token ids, each checked against [0, n_vocab).
std::vector<int32_t> parse_detokenize_body(std::string_view body, int n_vocab);

}  // namespace k25
