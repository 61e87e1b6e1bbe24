// Strings of the template engine: UTF-8 bytes plus the byte ranges that came from the caller's
// data (message text, tools) rather than from the template itself. Tokenisation parses special
// tokens only outside those ranges, so text a user typed can never become a control token.
// Also the Python str operations the templates use (Unicode whitespace, strip, split).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace k25::jinja {

struct ByteRange {
  size_t begin;
  size_t end;  // exclusive
};

struct Text {
  std::string bytes;
  std::vector<ByteRange> data_ranges;  // sorted, disjoint, non-empty: bytes from the caller's data

  Text() = default;
  explicit Text(std::string b) : bytes(std::move(b)) {}
  static Text from_data(std::string b);

  bool has_data() const { return !data_ranges.empty(); }
  void append(const Text& other);
  void append(std::string_view template_bytes) { bytes.append(template_bytes); }
  // Appends bytes that are data when `as_data` (a whole derived string inherits its inputs'
  // origin).
  void append_derived(std::string_view b, bool as_data);
  // bytes[begin, end) with the data ranges that fall inside it.
  Text substr(size_t begin, size_t end) const;
};

// Python's str.isspace() for one code point (the set str.strip() and str.split() use).
bool is_python_space(uint32_t cp);

// The code points of UTF-8 text (invalid bytes decode as U+FFFD, one per byte sequence).
std::vector<uint32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t code_point_count(std::string_view s);

enum class StripSide { Both, Left, Right };
// str.strip() / str.strip(chars) as the byte range kept; chars == nullptr strips whitespace.
ByteRange py_strip(std::string_view s, const std::string* chars, StripSide side);
// str.split() (sep == nullptr: runs of whitespace) and str.split(sep, maxsplit), as byte ranges.
std::vector<ByteRange> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.splitlines(): the byte ranges of the lines (without their line breaks).
std::vector<ByteRange> py_splitlines(std::string_view s);
// str.replace(old, new, count); count < 0 replaces all.
Text py_replace(const Text& s, std::string_view from, const Text& to, int64_t count);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

}  // namespace k25::jinja
