#include "loadgen/sse_parser.h"

#include <nlohmann/json.hpp>

namespace k25::loadgen {

using nlohmann::json;

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  pending_.append(bytes);
  size_t start = 0;
  for (;;) {
    const size_t end = pending_.find('\n', start);
    if (end == std::string::npos) break;
    std::string_view line(pending_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    take_line(line, events);
    start = end + 1;
  }
  pending_.erase(0, start);
  return events;
}

std::optional<std::string> SseParser::finish() {
  std::vector<std::string> events;
  if (!pending_.empty()) {
    std::string line = std::move(pending_);
    pending_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    take_line(line, events);
  }
  take_line("", events);
  if (events.empty()) return std::nullopt;
  return events.back();
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {  // end of an event
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment
  const size_t colon = line.find(':');
  std::string_view name = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (name != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

namespace {

std::optional<int> int_field(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

std::string first_line(const std::string& text, size_t max_chars = 200) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
  return line;
}

}  // namespace

CompletionEvent interpret_event(const std::string& data) {
  CompletionEvent event;
  if (data == "[DONE]") {
    event.kind = CompletionEvent::Kind::Done;
    return event;
  }
  json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    event.kind = CompletionEvent::Kind::Error;
    event.error = "stream event is not a JSON object: " + first_line(data);
    return event;
  }
  if (chunk.contains("error")) {
    event.kind = CompletionEvent::Kind::Error;
    event.error = error_message_of(data);
    return event;
  }
  auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    const json& choice = (*choices)[0];
    if (auto text = choice.find("text"); text != choice.end() && text->is_string()) {
      event.text = text->get<std::string>();
    } else if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      auto content = delta->find("content");
      if (content != delta->end() && content->is_string()) event.text = content->get<std::string>();
    }
  }
  auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object()) {
    event.prompt_tokens = int_field(*usage, "prompt_tokens");
    event.completion_tokens = int_field(*usage, "completion_tokens");
  }
  return event;
}

std::string error_message_of(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    auto error = parsed.find("error");
    if (error != parsed.end()) {
      if (error->is_string()) return first_line(error->get<std::string>());
      if (error->is_object()) {
        auto message = error->find("message");
        if (message != error->end() && message->is_string()) {
          return first_line(message->get<std::string>());
        }
      }
      return first_line(error->dump());
    }
  }
  return body.empty() ? "empty body" : first_line(body);
}

}  // namespace k25::loadgen
