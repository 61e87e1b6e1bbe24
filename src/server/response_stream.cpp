#include "server/response_stream.h"

#include "server/anthropic_format.h"

namespace k25 {

using nlohmann::json;

namespace {

constexpr const char* kDone = "data: [DONE]\n\n";

}  // namespace

std::string stream_opening(const ResponseContext& ctx, int n_choices) {
  if (ctx.flavor == ApiFlavor::Messages) return anthropic_stream_start(ctx);
  std::string out;
  for (int i = 0; i < n_choices; ++i) {
    json start = stream_start_chunk(ctx, i);
    if (!start.is_null()) out += sse_event(start);
  }
  return out;
}

std::string stream_text(const ResponseContext& ctx, int index, const std::string& text,
                        const std::vector<TokenLogprobEntry>* logprobs) {
  if (text.empty() && (!logprobs || logprobs->empty())) return "";
  if (ctx.flavor == ApiFlavor::Messages) return anthropic_stream_text(text);
  return sse_event(stream_text_chunk(ctx, index, text, logprobs));
}

std::string stream_choice_end(const ResponseContext& ctx, int index, const GenerationOutcome& o) {
  // Anthropic's message has one choice: its end is the end of the stream.
  if (ctx.flavor == ApiFlavor::Messages) return "";
  return sse_event(stream_finish_chunk(ctx, index, o));
}

std::string stream_closing(const ResponseContext& ctx,
                           const std::vector<GenerationOutcome>& choices) {
  if (ctx.flavor == ApiFlavor::Messages) return anthropic_stream_end(ctx, choices.at(0));
  json usage = stream_usage_chunk(ctx, choices);
  return (usage.is_null() ? std::string() : sse_event(usage)) + kDone;
}

std::string stream_error(const ResponseContext& ctx, const ApiError& error) {
  switch (ctx.flavor) {
    case ApiFlavor::Messages:
      return anthropic_stream_error(error);
    case ApiFlavor::Generate:
      return sse_event(error_body(error)) + kDone;
    default:
      return sse_event(error_body(error));
  }
}

}  // namespace k25
