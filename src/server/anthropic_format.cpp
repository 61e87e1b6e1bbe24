#include "server/anthropic_format.h"

#include <algorithm>

namespace k25 {

using nlohmann::json;

namespace {

// "event: <type>\ndata: <json>\n\n": Anthropic names every event after its payload's type.
std::string named_event(const json& payload) {
  return "event: " + payload["type"].get<std::string>() + "\ndata: " + json_text(payload) + "\n\n";
}

// end_turn (an end token or the template's turn end), max_tokens, or stop_sequence with the
// request's own stop sequence that matched.
std::pair<const char*, json> stop_reason(const ResponseContext& ctx, const GenerationOutcome& o) {
  if (o.finish_reason == FinishReason::Length) return {"max_tokens", nullptr};
  const auto& own = ctx.stop_sequences;
  if (!o.matched_stop.empty() && std::find(own.begin(), own.end(), o.matched_stop) != own.end()) {
    return {"stop_sequence", o.matched_stop};
  }
  return {"end_turn", nullptr};
}

json usage(const GenerationOutcome& o) {
  return {{"input_tokens", o.prompt_tokens},
          {"output_tokens", o.completion_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", o.cached_tokens}};
}

const char* error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

json anthropic_message(const ResponseContext& ctx, const GenerationOutcome& o) {
  const auto [reason, sequence] = stop_reason(ctx, o);
  return {{"id", ctx.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", ctx.model},
          {"content", json::array({{{"type", "text"}, {"text", o.text}}})},
          {"stop_reason", reason},
          {"stop_sequence", sequence},
          {"usage", usage(o)}};
}

std::string anthropic_stream_start(const ResponseContext& ctx) {
  json message = {{"id", ctx.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", ctx.model},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage",
                   {{"input_tokens", ctx.prompt_tokens},
                    {"output_tokens", 0},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", 0}}}};
  return named_event({{"type", "message_start"}, {"message", message}}) +
         named_event({{"type", "content_block_start"},
                      {"index", 0},
                      {"content_block", {{"type", "text"}, {"text", ""}}}}) +
         named_event({{"type", "ping"}});
}

std::string anthropic_stream_text(const std::string& text) {
  return named_event({{"type", "content_block_delta"},
                      {"index", 0},
                      {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string anthropic_stream_end(const ResponseContext& ctx, const GenerationOutcome& o) {
  const auto [reason, sequence] = stop_reason(ctx, o);
  return named_event({{"type", "content_block_stop"}, {"index", 0}}) +
         named_event({{"type", "message_delta"},
                      {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                      {"usage", usage(o)}}) +
         named_event({{"type", "message_stop"}});
}

std::string anthropic_stream_error(const ApiError& error) {
  return named_event(anthropic_error_body(error));
}

json anthropic_error_body(const ApiError& error) {
  return {{"type", "error"},
          {"error", {{"type", error_type(error.status)}, {"message", error.message}}}};
}

}  // namespace k25
