// Server-sent events as OpenAI streaming endpoints send them: bytes in (split anywhere), the data
// of each complete event out, then interpreted as completion chunks.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k25::loadgen {

// Splits a byte stream into events (blank-line separated, LF or CRLF) and returns the joined
// "data:" field of each; comments and other fields are dropped.
class SseParser {
 public:
  std::vector<std::string> feed(std::string_view bytes);
  // Data of a last event that was not followed by a blank line (a stream cut short), if any.
  std::optional<std::string> finish();

 private:
  void take_line(std::string_view line, std::vector<std::string>& events);

  std::string pending_;  // bytes of an incomplete line
  std::string data_;     // data lines of the current event
  bool has_data_ = false;
};

// What one event says about a /v1/completions stream.
struct CompletionEvent {
  enum class Kind { Done, Chunk, Error };
  Kind kind = Kind::Chunk;
  std::string text;                  // Chunk: choices[0].text (or delta.content)
  std::optional<int> prompt_tokens;  // Chunk: usage, when the server sent it
  std::optional<int> completion_tokens;
  std::string error;  // Error: the server's message, or why it did not parse
};
CompletionEvent interpret_event(const std::string& data);

// The message of an error body ({"error": {"message": ...}} or {"error": "..."}), else the body
// itself cut to a line.
std::string error_message_of(const std::string& body);

}  // namespace k25::loadgen
