// Request bodies of /generate, /v1/completions, /v1/chat/completions, /tokenize and /detokenize:
// JSON in, validated parameters out. Every problem is an ApiException (400) naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/grammar.h"
#include "model/sampler.h"
#include "server/chat_template.h"
#include "server/tool_request.h"

namespace k25 {

enum class ApiFlavor { Generate, Completions, Chat };

// What a request gets for the fields it leaves out, and the bounds on what it may ask.
struct RequestDefaults {
  SamplingParams sampling;  // temperature, top_k, top_p, min_p, repeat_penalty
  int max_tokens = 128;
  int context_size = 2048;  // max_tokens above this is rejected
  int max_top_logprobs = 20;
  int max_stop_strings = 16;
};

struct ParsedRequest {
  ApiFlavor flavor = ApiFlavor::Generate;
  std::string prompt;                              // text prompt (Generate, Completions)
  std::optional<std::vector<int64_t>> prompt_ids;  // Completions: prompt given as token ids
  std::vector<ChatMessage> messages;               // Chat
  std::string model;
  int max_tokens = 0;
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // "ignore_eos": true (llama.cpp's extension, for benchmarks)
  int top_logprobs = -1;       // < 0: no logprobs
  // R-KV4: /generate's "session_id", OpenAI's "user" (the server also reads x-session-id).
  std::string session_id;
  bool pruning_off = false;  // "pruning": "off" (R-PR5: the request runs the full model)
  // Constrained decoding (server/grammar_request.h): response_format, or /generate's "grammar"
  // and "json_schema". Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  ToolRequest tools;         // Chat: tools, tool_choice, parallel_tool_calls
};

// Throws ApiException on malformed JSON (including invalid UTF-8 and nesting deeper than 64).
nlohmann::json parse_json_body(std::string_view body);

ParsedRequest parse_request_body(ApiFlavor flavor, std::string_view body,
                                 const RequestDefaults& defaults);

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
};
TokenizeRequest parse_tokenize_body(std::string_view body);

// Token ids, each checked against [0, n_vocab).
std::vector<int32_t> parse_detokenize_body(std::string_view body, int n_vocab);

}  // namespace k25
