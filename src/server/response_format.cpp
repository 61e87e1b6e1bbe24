#include "server/response_format.h"

#include "server/anthropic_format.h"
#include "server/plan_text.h"
#include "server/tool_call_response.h"

namespace k25 {

using nlohmann::json;

std::string json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& payload) {
  return "data: " + json_text(payload) + "\n\n";
}

namespace {

json bytes_of(const std::string& s) {
  json bytes = json::array();
  for (unsigned char c : s) bytes.push_back(c);
  return bytes;
}

json completion_logprobs(const std::vector<TokenLogprobEntry>& entries, size_t text_offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprobEntry& e : entries) {
    tokens.push_back(e.piece);
    token_logprobs.push_back(e.logprob);
    json alternatives = json::object();
    for (const auto& [piece, lp] : e.top) alternatives[piece] = lp;
    top.push_back(alternatives);
    offsets.push_back(text_offset);
    text_offset += e.piece.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json chat_logprobs(const std::vector<TokenLogprobEntry>& entries) {
  json content = json::array();
  for (const TokenLogprobEntry& e : entries) {
    json top = json::array();
    for (const auto& [piece, lp] : e.top) {
      top.push_back({{"token", piece}, {"logprob", lp}, {"bytes", bytes_of(piece)}});
    }
    content.push_back({{"token", e.piece},
                       {"logprob", e.logprob},
                       {"bytes", bytes_of(e.piece)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Where the cached prompt tokens came from (docs/kv-cache.md): L2 RAM, the local disk, Redis.
json cached_by_tier(const GenerationOutcome& o) {
  return {{"l2", o.cached_tokens - o.cached_tokens_disk - o.cached_tokens_shared},
          {"disk", o.cached_tokens_disk},
          {"redis", o.cached_tokens_shared}};
}

json usage(const GenerationOutcome& o) {
  return {{"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"total_tokens", o.prompt_tokens + o.completion_tokens},
          {"prompt_tokens_details",
           {{"cached_tokens", o.cached_tokens}, {"cached_tokens_by_tier", cached_by_tier(o)}}}};
}

json flash(const ResponseContext& ctx, const GenerationOutcome& o) {
  json blocks = json::array(), heads = json::array();
  const PlanSkips skips = parse_plan_text(ctx.plan);
  for (int l : skips.attention_off) blocks.push_back({{"layer", l}, {"module", "attention"}});
  for (int l : skips.ffn_off) blocks.push_back({{"layer", l}, {"module", "ffn"}});
  for (const auto& [l, h] : skips.heads_off) heads.push_back({{"layer", l}, {"head", h}});
  json out = {{"domain", ctx.flash_domain},
              {"level", ctx.flash_level},
              {"skipped_blocks", blocks},
              {"skipped_heads", heads},
              {"plan", ctx.plan},
              {"compute_saved", ctx.compute_saved},
              {"priority", sla_priority(ctx.hints.sla)},
              {"drafted_tokens", o.drafted_tokens},
              {"accepted_tokens", o.accepted_tokens}};
  // The fields above describe the admission plan (Levels 1-2); Level 3 may have changed it
  // every 32 decode tokens.
  if (o.adaptive_decisions > 0) {
    out["adaptive"] = {{"decisions", o.adaptive_decisions},
                       {"final_plan", o.final_plan},
                       {"final_skipped_blocks", parse_plan_text(o.final_plan).skipped_blocks()}};
  }
  return out;
}

// The answer's timings and compute plan: part of /generate's summary (R-API1) and k25's extension
// of the OpenAI shapes (as llama.cpp's server adds `timings`), on the whole response and on the
// chunk with the finish reason. OpenAI clients ignore fields they do not know; the chat page
// shows them.
void add_k25_summary(json& out, const ResponseContext& ctx, const GenerationOutcome& o) {
  out["timings"] = {{"ttft_ms", o.ttft_ms}, {"total_ms", o.total_ms}};
  out["flash"] = flash(ctx, o);
}

json generate_summary(const ResponseContext& ctx, const GenerationOutcome& o) {
  // /generate keeps k25's own values, "cancelled" and "error" included.
  json out = {{"finish_reason", finish_reason_name(o.finish_reason)},
              {"usage",
               {{"prompt_tokens", o.prompt_tokens},
                {"completion_tokens", o.completion_tokens},
                {"cached_tokens", o.cached_tokens},
                {"cached_tokens_by_tier", cached_by_tier(o)}}}};
  add_k25_summary(out, ctx, o);
  return out;
}

json openai_envelope(const ResponseContext& ctx, const char* object) {
  return {{"id", ctx.id}, {"object", object}, {"created", ctx.created}, {"model", ctx.model}};
}

bool made_tool_calls(const GenerationOutcome& o) {
  return o.tools && !o.tools->calls.empty();
}

// OpenAI's finish reason: "tool_calls" when the answer made calls.
std::string finish_reason_of(const GenerationOutcome& o) {
  return made_tool_calls(o) ? "tool_calls" : openai_finish_reason(o.finish_reason);
}

const char* chunk_object(ApiFlavor flavor) {
  return flavor == ApiFlavor::Chat ? "chat.completion.chunk" : "text_completion";
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  return reason == FinishReason::Length ? "length" : "stop";
}

GenerationOutcome summed_usage(const std::vector<GenerationOutcome>& choices) {
  GenerationOutcome total;
  if (choices.empty()) return total;
  total.prompt_tokens = choices.front().prompt_tokens;
  total.cached_tokens = choices.front().cached_tokens;
  total.cached_tokens_disk = choices.front().cached_tokens_disk;
  total.cached_tokens_shared = choices.front().cached_tokens_shared;
  for (const GenerationOutcome& c : choices) total.completion_tokens += c.completion_tokens;
  return total;
}

json full_response(const ResponseContext& ctx, const std::vector<GenerationOutcome>& choices) {
  if (ctx.flavor == ApiFlavor::Generate) {
    json out = generate_summary(ctx, choices.at(0));
    out["text"] = choices[0].text;
    return out;
  }
  if (ctx.flavor == ApiFlavor::Messages) return anthropic_message(ctx, choices.at(0));
  json out =
      openai_envelope(ctx, ctx.flavor == ApiFlavor::Chat ? "chat.completion" : "text_completion");
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const GenerationOutcome& o = choices[i];
    json choice = {{"index", i}, {"finish_reason", finish_reason_of(o)}};
    if (ctx.flavor == ApiFlavor::Chat) {
      choice["message"] = {{"role", "assistant"}, {"content", o.tools ? o.tools->content : o.text}};
      if (made_tool_calls(o)) {
        if (o.tools->content.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = tool_calls_message_json(o.tools->calls);
      }
      choice["logprobs"] = o.want_logprobs ? chat_logprobs(o.logprobs) : json();
    } else {
      choice["text"] = o.text;
      choice["logprobs"] = o.want_logprobs ? completion_logprobs(o.logprobs, 0) : json();
    }
    out["choices"].push_back(choice);
  }
  out["usage"] = usage(summed_usage(choices));
  add_k25_summary(out, ctx, choices.at(0));
  return out;
}

json stream_start_chunk(const ResponseContext& ctx, int index) {
  if (ctx.flavor != ApiFlavor::Chat) return json();
  json out = openai_envelope(ctx, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", index},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  if (ctx.include_usage) out["usage"] = nullptr;
  return out;
}

json stream_text_chunk(const ResponseContext& ctx, int index, const std::string& text,
                       const std::vector<TokenLogprobEntry>* logprobs) {
  if (ctx.flavor == ApiFlavor::Generate) return {{"text", text}};
  json out = openai_envelope(ctx, chunk_object(ctx.flavor));
  json choice = {{"index", index}, {"finish_reason", nullptr}};
  if (ctx.flavor == ApiFlavor::Chat) {
    choice["delta"] = {{"content", text}};
    choice["logprobs"] = logprobs ? chat_logprobs(*logprobs) : json();
  } else {
    choice["text"] = text;
    choice["logprobs"] = logprobs ? completion_logprobs(*logprobs, 0) : json();
  }
  out["choices"] = json::array({choice});
  if (ctx.include_usage) out["usage"] = nullptr;
  return out;
}

json stream_tool_calls_chunk(const ResponseContext& ctx, int index,
                             const std::vector<ToolCall>& calls) {
  json out = openai_envelope(ctx, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", index},
                                 {"delta", {{"tool_calls", tool_calls_delta_json(calls)}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  if (ctx.include_usage) out["usage"] = nullptr;
  return out;
}

json stream_finish_chunk(const ResponseContext& ctx, int index, const GenerationOutcome& o) {
  if (ctx.flavor == ApiFlavor::Generate) {
    json last = generate_summary(ctx, o);
    last["text"] = "";
    return last;
  }
  json out = openai_envelope(ctx, chunk_object(ctx.flavor));
  json choice = {{"index", index}, {"finish_reason", finish_reason_of(o)}, {"logprobs", nullptr}};
  if (ctx.flavor == ApiFlavor::Chat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  out["choices"] = json::array({choice});
  if (ctx.include_usage) out["usage"] = nullptr;
  add_k25_summary(out, ctx, o);
  return out;
}

json stream_usage_chunk(const ResponseContext& ctx, const std::vector<GenerationOutcome>& choices) {
  if (ctx.flavor == ApiFlavor::Generate || !ctx.include_usage) return json();
  json tail = openai_envelope(ctx, chunk_object(ctx.flavor));
  tail["choices"] = json::array();
  tail["usage"] = usage(summed_usage(choices));
  return tail;
}

}  // namespace k25
