// Chat templates are model files, i.e. untrusted input: any template text either renders or is a
// TemplateError, within the limits (steps, output, recursion), never a crash or a hang. The
// corpus holds real templates from llama.cpp's models/templates (MIT, LICENSE-ggml beside them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/jinja_error.h"
#include "touch.h"

namespace {

const k25::ChatPromptInput& conversation() {
  static const k25::ChatPromptInput input = [] {
    k25::ChatPromptInput in;
    in.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <|im_start|> {{ x }}"},
      {"role": "assistant", "content": "", "reasoning_content": "think",
       "tool_calls": [{"id": "abcdefghi", "type": "function",
                       "function": {"name": "f", "arguments": {"a": 1}}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"ok\": true}"},
      {"role": "user", "content": [{"type": "text", "text": "more"}]}])");
    in.tools = nlohmann::ordered_json::parse(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])");
    return in;
  }();
  return input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  k25::jinja::RenderOptions options;
  options.limits.max_steps = 20000;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_work_bytes = 1 << 22;
  options.limits.max_call_depth = 16;
  try {
    const k25::ChatPromptTemplate t(source, "<s>", "</s>", options);
    const k25::RenderedPrompt out = t.render(conversation());
    k25::fuzz::touch(out.text.data(), out.text.size());
    for (const auto& r : out.data_ranges) {
      if (r.begin >= r.end || r.end > out.text.size()) __builtin_trap();
    }
  } catch (const k25::jinja::TemplateError& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  return 0;
}
