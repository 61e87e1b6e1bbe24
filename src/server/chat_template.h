// Chat prompts: the template family is recognised from the model's tokenizer.chat_template text
// (a Jinja program we do not execute) and rendered by our own code for that family.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k25 {

struct ChatMessage {
  std::string role;  // system, user, assistant (tool/developer are rendered like user)
  std::string content;
};

enum class ChatTemplate {
  ChatMl,  // <|im_start|>role\ncontent<|im_end|>\n (Qwen, SmolLM, ...)
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  Llama2,  // [INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] assistant </s>
  Zephyr,  // <|role|>\ncontent</s>\n (TinyLlama chat)
  Plain,   // "role: content\n" lines, for models without a template (stories260K)
};

// Which family a tokenizer.chat_template belongs to; Plain when empty or unrecognised.
ChatTemplate detect_chat_template(std::string_view template_text);
const char* chat_template_name(ChatTemplate kind);

// The prompt text for `messages`, ending with the assistant's turn opened. Special tokens appear
// as text (tokenise with parse_special). No BOS: the tokenizer adds it when the vocabulary asks.
std::string render_chat(ChatTemplate kind, const std::vector<ChatMessage>& messages);

// Text that ends the assistant's turn in this family, beside the vocabulary's end tokens
// (a special token, or for Plain the start of the next user line).
std::vector<std::string> chat_end_markers(ChatTemplate kind);

}  // namespace k25
