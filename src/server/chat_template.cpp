#include "server/chat_template.h"

namespace k25 {

ChatTemplate detect_chat_template(std::string_view t) {
  auto has = [&](std::string_view needle) { return t.find(needle) != std::string_view::npos; };
  if (has("<|im_start|>")) return ChatTemplate::ChatMl;
  if (has("<|start_header_id|>")) return ChatTemplate::Llama3;
  if (has("<|user|>") && has("<|assistant|>")) return ChatTemplate::Zephyr;
  if (has("[INST]")) return ChatTemplate::Llama2;
  return ChatTemplate::Plain;
}

const char* chat_template_name(ChatTemplate kind) {
  switch (kind) {
    case ChatTemplate::ChatMl:
      return "chatml";
    case ChatTemplate::Llama3:
      return "llama3";
    case ChatTemplate::Llama2:
      return "llama2";
    case ChatTemplate::Zephyr:
      return "zephyr";
    case ChatTemplate::Plain:
      return "plain";
  }
  return "plain";
}

namespace {

// Roles other than system/assistant speak as the user in templates that know only three.
std::string_view basic_role(const std::string& role) {
  if (role == "system" || role == "assistant") return role;
  return "user";
}

std::string render_llama2(const std::vector<ChatMessage>& messages) {
  std::string out;
  std::string system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    std::string_view role = basic_role(m.role);
    if (role == "system") {
      system += m.content;
    } else if (role == "user") {
      if (!first_user) out += "<s>";
      out += "[INST] ";
      if (!system.empty()) {
        out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        system.clear();
      }
      out += m.content + " [/INST]";
      first_user = false;
    } else {
      out += " " + m.content + " </s>";
    }
  }
  return out;
}

}  // namespace

std::string render_chat(ChatTemplate kind, const std::vector<ChatMessage>& messages) {
  std::string out;
  switch (kind) {
    case ChatTemplate::ChatMl:
      for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      return out + "<|im_start|>assistant\n";
    case ChatTemplate::Llama3:
      for (const ChatMessage& m : messages) {
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      }
      return out + "<|start_header_id|>assistant<|end_header_id|>\n\n";
    case ChatTemplate::Llama2:
      return render_llama2(messages);
    case ChatTemplate::Zephyr:
      for (const ChatMessage& m : messages) {
        out += "<|" + std::string(basic_role(m.role)) + "|>\n" + m.content + "</s>\n";
      }
      return out + "<|assistant|>\n";
    case ChatTemplate::Plain:
      for (const ChatMessage& m : messages) out += m.role + ": " + m.content + "\n";
      return out + "assistant:";
  }
  return out;
}

std::vector<std::string> chat_end_markers(ChatTemplate kind) {
  switch (kind) {
    case ChatTemplate::ChatMl:
      return {"<|im_end|>"};
    case ChatTemplate::Llama3:
      return {"<|eot_id|>"};
    case ChatTemplate::Llama2:
      return {"</s>"};
    case ChatTemplate::Zephyr:
      return {"</s>"};
    case ChatTemplate::Plain:
      return {"\nuser:"};
  }
  return {};
}

}  // namespace k25
