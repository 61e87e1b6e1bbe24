#include "server/tool_call_stream.h"

namespace k25 {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Where a suffix of `text` begins that is a proper prefix of `marker` (text.size() when none).
size_t partial_marker_at(std::string_view text, std::string_view marker) {
  const size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  }
  return text.size();
}

}  // namespace

ToolCallStream::ToolCallStream(ToolCallFormat format, const nlohmann::json& tools)
    : format_(format), tools_(tools), starts_(tool_call_starts(format)) {}

std::string ToolCallStream::push(std::string_view text) {
  pending_ += text;
  if (section_at_ != std::string::npos) return "";
  section_at_ = find_tool_call_start(format_, pending_, !content_started_);
  // Held back: a marker's beginning, and the whitespace before it or at the end (trimmed away
  // if calls follow).
  size_t keep = section_at_;
  if (keep == std::string::npos) {
    keep = pending_.size();
    for (const ToolCallStart& start : starts_) {
      if (start.only_at_beginning && content_started_) continue;
      keep = std::min(keep, partial_marker_at(pending_, start.marker));
    }
  }
  while (keep > 0 && is_space(pending_[keep - 1])) --keep;
  std::string out = pending_.substr(0, keep);
  pending_.erase(0, keep);
  if (section_at_ != std::string::npos) section_at_ -= keep;
  for (char c : out) content_started_ = content_started_ || !is_space(c);
  return out;
}

ToolCallParse ToolCallStream::finish() {
  ToolCallParse out;
  std::optional<ToolCallSection> section;
  if (section_at_ != std::string::npos) {
    section =
        parse_tool_call_section(format_, std::string_view(pending_).substr(section_at_), tools_);
  }
  if (!section) {
    out.content = std::move(pending_);
  } else {
    out.content = content_around_calls("", section->trailing);
    out.calls = std::move(section->calls);
  }
  pending_.clear();
  section_at_ = std::string::npos;
  return out;
}

}  // namespace k25
