// The chat prompt of the served model: its own Jinja template (tokenizer.chat_template from GGUF
// or tokenizer_config.json, or a file given to the server), parsed once at load and rendered per
// request as transformers' apply_chat_template does. As there, a request with tools renders with
// the model's "tool_use" variant when it has one (Hermes 2 Pro, Command R+), else the default. The
// one entry point for every chat route (OpenAI chat, Anthropic messages): render(messages, tools)
// -> text and tokens.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace k25 {

struct ChatPrompt {
  std::string text;             // the rendered conversation (fingerprinted like a prompt)
  std::vector<TokenId> tokens;  // special tokens only where the template wrote them
};

class ChatTemplate {
 public:
  // `source_override`: a template text that replaces the model's (server option), variants
  // included; empty: use the model's. A model without a template gets a fallback (see kind()). A
  // template that does not parse is kept as its error: every chat request it would render then
  // fails with 500 naming it.
  ChatTemplate(const Tokenizer& tokenizer, const std::string& source_override = {});

  // messages: the request's array as sent (validated by parse_chat_messages); tools: the
  // request's array or null (not null: the tool_use variant renders it, when there is one).
  // extra_vars: further template variables (chat_template_kwargs).
  // Throws ApiException: 400 when the template rejects the conversation (raise_exception, a
  // type error on this input), 500 when the template did not parse.
  ChatPrompt render(
      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
      const nlohmann::ordered_json& extra_vars = nlohmann::ordered_json::object()) const;

  // "model", "file", "fallback-chatml", "fallback-plain", or "unparsable".
  const std::string& kind() const { return kind_; }
  // The template's parse error when kind() is "unparsable".
  const std::string& parse_error() const { return default_.parse_error; }
  // Whether requests with tools render with the model's tool_use variant.
  bool has_tool_use() const { return tool_use_.has_value(); }
  // The text of the template that renders requests with tools: the one whose markers decide
  // the tool-call format.
  const std::string& tools_source() const {
    return tool_use_ ? tool_use_->source : default_.source;
  }
  // Stop conditions beside the vocabulary's end-of-generation tokens (fallbacks only).
  const std::vector<TokenId>& stop_tokens() const { return stop_tokens_; }
  const std::vector<std::string>& stop_strings() const { return stop_strings_; }

 private:
  struct Parsed {
    std::string source;
    std::unique_ptr<ChatPromptTemplate> program;  // null when the source does not parse
    std::string parse_error;
  };
  Parsed parse(std::string source, const char* what) const;

  const Tokenizer& tokenizer_;
  Parsed default_;
  std::optional<Parsed> tool_use_;
  std::string kind_;
  bool add_bos_ = false;  // fallbacks: BOS as the vocabulary asks; real templates write their own
  std::vector<TokenId> stop_tokens_;
  std::vector<std::string> stop_strings_;
};

}  // namespace k25
