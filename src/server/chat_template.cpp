#include "server/chat_template.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "server/api_error.h"
#include "tokenizer/jinja_error.h"

namespace k25 {

namespace {

using ojson = nlohmann::ordered_json;

// Models without a template (stories260K): ChatML when the vocabulary has its tokens, else
// "role: content" lines ending with "assistant:" (and "\nuser:" stops the answer). Content may
// be a string, text parts, or null (an assistant turn of only tool calls).
constexpr const char* kChatMlFallback =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}{% elif m.content %}{% for p in m.content %}"
    "{{ p.text }}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% "
    "endif %}";
constexpr const char* kPlainFallback =
    "{% for m in messages %}{{ m.role }}: "
    "{% if m.content is string %}{{ m.content }}{% elif m.content %}{% for p in m.content %}"
    "{{ p.text }}{% endfor %}"
    "{% endif %}{{ '\\n' }}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

std::string token_text(const Tokenizer& t, TokenId id) {
  return id >= 0 && id < t.n_vocab() ? t.vocab().tokens[static_cast<size_t>(id)] : std::string();
}

TokenId find_token(const Vocab& v, const std::string& text) {
  auto it = std::find(v.tokens.begin(), v.tokens.end(), text);
  return it == v.tokens.end() ? -1 : static_cast<TokenId>(it - v.tokens.begin());
}

}  // namespace

ChatTemplate::ChatTemplate(const Tokenizer& tokenizer, const std::string& source_override)
    : tokenizer_(tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  std::string source = source_override.empty() ? vocab.chat_template : source_override;
  kind_ = source_override.empty() ? "model" : "file";
  if (source.empty()) {
    const TokenId im_end = find_token(vocab, "<|im_end|>");
    const bool chatml = im_end >= 0 && find_token(vocab, "<|im_start|>") >= 0;
    source = chatml ? kChatMlFallback : kPlainFallback;
    kind_ = chatml ? "fallback-chatml" : "fallback-plain";
    add_bos_ = true;
    if (chatml) {
      stop_tokens_.push_back(im_end);
    } else {
      stop_strings_.push_back("\nuser:");
    }
  }
  default_ = parse(std::move(source), "the chat template");
  if (!default_.program) kind_ = "unparsable";
  if (source_override.empty()) {
    const auto tool_use = vocab.named_chat_templates.find("tool_use");
    if (tool_use != vocab.named_chat_templates.end()) {
      tool_use_ = parse(tool_use->second, "the tool_use chat template");
    }
  }
}

ChatTemplate::Parsed ChatTemplate::parse(std::string source, const char* what) const {
  Parsed out;
  out.source = std::move(source);
  try {
    out.program = std::make_unique<ChatPromptTemplate>(
        out.source, token_text(tokenizer_, tokenizer_.vocab().bos),
        token_text(tokenizer_, tokenizer_.vocab().eos));
  } catch (const jinja::TemplateError& e) {
    out.parse_error = e.what();
    std::fprintf(stderr, "warning: %s does not parse (%s); chat requests it renders will fail\n",
                 what, out.parse_error.c_str());
  }
  return out;
}

ChatPrompt ChatTemplate::render(const ojson& messages, const ojson& tools,
                                const ojson& extra_vars) const {
  const Parsed& chosen = tool_use_ && !tools.is_null() ? *tool_use_ : default_;
  if (!chosen.program) {
    const char* which = &chosen == &default_ ? "chat template" : "tool_use chat template";
    throw ApiException(
        ApiError{500, concat("the model's ", which, " does not parse: ", chosen.parse_error),
                 "server_error", "", "template_error"});
  }
  ChatPromptInput input;
  input.messages = messages;
  input.tools = tools;
  input.add_generation_prompt = true;
  input.extra_vars = extra_vars;
  RenderedPrompt rendered;
  try {
    rendered = chosen.program->render(input);
  } catch (const jinja::TemplateError& e) {
    // raise_exception() text is the template's own message ("System role not supported").
    const std::string message =
        e.kind() == jinja::ErrorKind::Raised ? "chat template: " + e.message() : e.what();
    throw_bad_request(message, "messages", "template_error");
  }
  std::vector<std::pair<size_t, size_t>> plain;
  plain.reserve(rendered.data_ranges.size());
  for (const jinja::ByteRange& r : rendered.data_ranges) plain.emplace_back(r.begin, r.end);
  ChatPrompt out;
  out.tokens = tokenizer_.encode_with_plain_ranges(rendered.text, add_bos_, plain);
  out.text = std::move(rendered.text);
  return out;
}

}  // namespace k25
