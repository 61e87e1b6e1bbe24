// Tool calls out of a streamed answer. Text goes on as content as soon as it cannot be the
// start of a call; from a start marker on (or what may become one, like the stop-string
// matcher holds) it is held until the answer ends, then parsed. What the stream hands out,
// put together, equals parse_tool_calls on the whole answer, however the text was split.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/tool_call_parser.h"

namespace k25 {

class ToolCallStream {
 public:
  // `tools` must outlive the stream.
  ToolCallStream(ToolCallFormat format, const nlohmann::json& tools);

  // The next piece of the answer in; the content that is final now out (often empty).
  std::string push(std::string_view text);
  // The answer ended: the content still held, and the calls.
  ToolCallParse finish();

 private:
  ToolCallFormat format_;
  const nlohmann::json& tools_;
  std::vector<ToolCallStart> starts_;
  std::string pending_;  // not handed out yet: whitespace, a possible marker, or a section
  size_t section_at_ = std::string::npos;  // where in pending_ a start marker was found
  bool content_started_ = false;           // non-whitespace content handed out already
};

}  // namespace k25
