// Bracket nesting of JSON text followed byte by byte without parsing it: strings (with their
// escapes) are skipped, so a "{" or "]" inside one does not count. For the places that must know
// how deep a value goes, or where it ends, before handing the text to the JSON parser: the
// request body's depth limit and the end of a JSON value inside model output. Header-only: it
// runs on every byte of a request body.
#pragma once

namespace k25 {

class JsonNesting {
 public:
  // Takes the next byte; returns the depth after it. An opening bracket outside a string adds
  // one, a closing one takes one away (below zero on unbalanced text: the parser rejects it).
  int step(char c) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      --depth_;
    }
    return depth_;
  }
  int depth() const { return depth_; }

 private:
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace k25
