#include "tokenizer/chat_prompt.h"

#include "tokenizer/jinja_json.h"

namespace k25 {

ChatPromptTemplate::ChatPromptTemplate(const std::string& source, std::string bos_token,
                                       std::string eos_token, jinja::RenderOptions options)
    : template_(source),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      options_(std::move(options)) {}

RenderedPrompt ChatPromptTemplate::render(const ChatPromptInput& input) const {
  using jinja::Value;
  jinja::Variables vars;
  vars.emplace_back("messages", jinja::value_from_json(input.messages, true));
  vars.emplace_back("tools", jinja::value_from_json(input.tools, true));
  vars.emplace_back("documents", Value::none());
  vars.emplace_back("add_generation_prompt", Value::boolean(input.add_generation_prompt));
  vars.emplace_back("bos_token", Value::string(bos_token_));
  vars.emplace_back("eos_token", Value::string(eos_token_));
  for (const auto& [name, value] : input.extra_vars.items()) {
    vars.emplace_back(name, jinja::value_from_json(value, true));
  }
  jinja::Text out = template_.render(vars, options_);
  return {std::move(out.bytes), std::move(out.data_ranges)};
}

}  // namespace k25
