// JSON shapes of generation responses: /generate (R-API1) and OpenAI's completions and chat
// completions, whole or as server-sent-event chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/finish_reason.h"
#include "server/flash_headers.h"
#include "server/request_parsing.h"
#include "server/tool_call_parser.h"

namespace k25 {

// One generated token with its logprobs, token texts already looked up.
struct TokenLogprobEntry {
  std::string piece;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

// Everything a response says about the request beside the generated text.
struct ResponseContext {
  ApiFlavor flavor = ApiFlavor::Generate;
  std::string id;  // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;
  std::string model;
  FlashHints hints;
  bool include_usage = false;
  int prompt_tokens = 0;  // known before the first event (Anthropic's message_start says it)
  // Anthropic: the request's own stop_sequences (a chat template's turn-end markers are stop
  // strings too, but stopping at one is end_turn).
  std::vector<std::string> stop_sequences;
  // R-PR5: what Flash decided. The domain actually used (the hint or the SimHash match), the
  // pruning level and the plan (its description: "full", or server/plan_text.h's form).
  std::string flash_domain = "default";
  int flash_level = 0;
  std::string plan = "full";
  double compute_saved = 0;
};

struct GenerationOutcome {
  std::string text;
  std::vector<TokenLogprobEntry> logprobs;
  bool want_logprobs = false;
  FinishReason finish_reason = FinishReason::Stop;
  std::string matched_stop;  // the stop string that ended it, if one did
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens reused from the KV prefix cache
  int cached_tokens_disk = 0, cached_tokens_shared = 0;  // of those, from the disk / Redis
  int completion_tokens = 0;
  double ttft_ms = 0;
  double total_ms = 0;
  int adaptive_decisions = 0;                   // Level 3 decisions during decode
  std::string final_plan = "full";              // the plan at the end
  int drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding (engine/speculation.h)
  // Chat with tools offered: the text split into content and calls (ids assigned).
  std::optional<ToolCallParse> tools;
};

// OpenAI's finish_reason ("stop", "length"). Cancelled and failed requests end with an error
// instead (on /generate they keep finish_reason_name's "cancelled" and "error").
const char* openai_finish_reason(FinishReason reason);

// The usage of n choices of one prompt, as OpenAI counts it: the prompt once, every choice's
// completion tokens.
GenerationOutcome summed_usage(const std::vector<GenerationOutcome>& choices);

// The whole response of a non-streaming request; choices[i] is choice i (/generate: one).
nlohmann::json full_response(const ResponseContext& ctx,
                             const std::vector<GenerationOutcome>& choices);

// Streaming: the first chunk of choice `index` (chat sends the assistant role; others nothing →
// null json).
nlohmann::json stream_start_chunk(const ResponseContext& ctx, int index);
// A chunk carrying new text (and the logprobs of the tokens behind it, when asked for).
nlohmann::json stream_text_chunk(const ResponseContext& ctx, int index, const std::string& text,
                                 const std::vector<TokenLogprobEntry>* logprobs);
// The chunk that ends choice `index`: its finish reason (OpenAI) or the R-API1 summary.
nlohmann::json stream_finish_chunk(const ResponseContext& ctx, int index,
                                   const GenerationOutcome& outcome);
// After every choice finished: the usage chunk when asked for (OpenAI), else null json.
nlohmann::json stream_usage_chunk(const ResponseContext& ctx,
                                  const std::vector<GenerationOutcome>& choices);

// A chunk carrying the tool calls of a streamed chat answer (each call whole).
nlohmann::json stream_tool_calls_chunk(const ResponseContext& ctx, int index,
                                       const std::vector<ToolCall>& calls);

// "data: <json>\n\n" with invalid UTF-8 replaced (it cannot occur, but JSON must stay valid).
std::string sse_event(const nlohmann::json& payload);
std::string json_text(const nlohmann::json& value);

}  // namespace k25
