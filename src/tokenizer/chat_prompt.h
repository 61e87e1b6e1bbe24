// A model's chat template (tokenizer.chat_template) run the way transformers'
// apply_chat_template runs it: variables messages, tools (None when absent), documents (None),
// add_generation_prompt, bos_token, eos_token, plus extra variables. The messages and tools are
// marked as data, so the rendered prompt says which bytes the template wrote itself.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/jinja_template.h"

namespace k25 {

struct ChatPromptInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: the template sees tools = None
  bool add_generation_prompt = true;
  nlohmann::ordered_json extra_vars = nlohmann::ordered_json::object();  // name -> value
};

struct RenderedPrompt {
  std::string text;
  // Bytes that came from the messages, tools or extra variables: tokenise them as plain text.
  std::vector<jinja::ByteRange> data_ranges;
};

class ChatPromptTemplate {
 public:
  // Parses the template once; throws jinja::TemplateError when it does not parse.
  ChatPromptTemplate(const std::string& source, std::string bos_token, std::string eos_token,
                     jinja::RenderOptions options = {});
  // Throws jinja::TemplateError when the template fails or raises for this conversation.
  RenderedPrompt render(const ChatPromptInput& input) const;

 private:
  jinja::Template template_;
  std::string bos_token_, eos_token_;
  jinja::RenderOptions options_;
};

}  // namespace k25
