#include "tokenizer/jinja_text.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace k25::jinja {

Text Text::from_data(std::string b) {
  Text t(std::move(b));
  if (!t.bytes.empty()) t.data_ranges.push_back({0, t.bytes.size()});
  return t;
}

void Text::append(const Text& other) {
  const size_t base = bytes.size();
  bytes += other.bytes;
  for (const ByteRange& r : other.data_ranges) {
    if (!data_ranges.empty() && data_ranges.back().end == base + r.begin) {
      data_ranges.back().end = base + r.end;
    } else {
      data_ranges.push_back({base + r.begin, base + r.end});
    }
  }
}

Text Text::substr(size_t begin, size_t end) const {
  Text out(bytes.substr(begin, end - begin));
  for (const ByteRange& r : data_ranges) {
    const size_t b = std::max(r.begin, begin), e = std::min(r.end, end);
    if (b < e) out.data_ranges.push_back({b - begin, e - begin});
  }
  return out;
}

void Text::append_derived(std::string_view b, bool as_data) {
  if (as_data) {
    Text t = from_data(std::string(b));
    append(t);
  } else {
    bytes.append(b);
  }
}

bool is_python_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    out.push_back(step.codepoint);
    pos += step.length;
  }
  return out;
}

std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) unicode::append_utf8(out, cps[i]);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) pos += unicode::decode_utf8(s, pos).length;
  return n;
}

ByteRange py_strip(std::string_view s, const std::string* chars, StripSide side) {
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strips = [&](uint32_t cp) {
    if (!chars) return is_python_space(cp);
    for (uint32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  // Byte offsets of each code point, so that the kept range is exact.
  std::vector<size_t> starts;
  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < s.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    starts.push_back(pos);
    cps.push_back(step.codepoint);
    pos += step.length;
  }
  size_t begin = 0, end = cps.size();
  if (side != StripSide::Right) {
    while (begin < end && strips(cps[begin])) ++begin;
  }
  if (side != StripSide::Left) {
    while (end > begin && strips(cps[end - 1])) --end;
  }
  const size_t b = begin < cps.size() ? starts[begin] : s.size();
  const size_t e = end < cps.size() ? starts[end] : s.size();
  return {b, std::max(b, e)};
}

std::vector<ByteRange> py_split(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<ByteRange> out;
  if (sep) {
    size_t start = 0;
    for (;;) {
      const size_t at = (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit)
                            ? s.find(*sep, start)
                            : std::string_view::npos;
      if (at == std::string_view::npos) break;
      out.push_back({start, at});
      start = at + sep->size();
    }
    out.push_back({start, s.size()});
    return out;
  }
  auto space_at = [&](size_t pos, size_t& len) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    len = step.length;
    return step.valid && is_python_space(step.codepoint);
  };
  size_t i = 0, len = 0;
  while (i < s.size()) {
    while (i < s.size() && space_at(i, len)) i += len;
    if (i == s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      const ByteRange rest = py_strip(s.substr(i), nullptr, StripSide::Right);
      out.push_back({i, i + rest.end});
      break;
    }
    const size_t start = i;
    while (i < s.size() && !space_at(i, len)) i += len;
    out.push_back({start, i});
  }
  return out;
}

std::vector<ByteRange> py_splitlines(std::string_view s) {
  std::vector<ByteRange> out;
  size_t start = 0;
  for (size_t pos = 0; pos < s.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    const uint32_t c = step.codepoint;
    const bool is_break = (c >= 0x0A && c <= 0x0D) || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                          c == 0x2028 || c == 0x2029;
    size_t next = pos + step.length;
    if (is_break) {
      out.push_back({start, pos});
      if (c == '\r' && next < s.size() && s[next] == '\n') ++next;
      start = next;
    }
    pos = next;
  }
  if (start < s.size()) out.push_back({start, s.size()});
  return out;
}

Text py_replace(const Text& s, std::string_view from, const Text& to, int64_t count) {
  Text out;
  const std::string& b = s.bytes;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    int64_t done = 0;
    for (size_t pos = 0;;) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      if (pos >= b.size()) break;
      const size_t len = unicode::decode_utf8(b, pos).length;
      out.append(s.substr(pos, pos + len));
      pos += len;
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = b.find(from, start);
    if (at == std::string::npos) break;
    out.append(s.substr(start, at));
    out.append(to);
    start = at + from.size();
    ++done;
  }
  out.append(s.substr(start, b.size()));
  return out;
}

namespace {

// Simple case mapping for ASCII, Latin-1, Greek and Cyrillic (the scripts of role names and
// keywords in real templates); other code points are unchanged.
uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased_letter(uint32_t c) {
  return to_upper(c) != c || to_lower(c) != c;
}

template <typename F>
std::string map_code_points(std::string_view s, F&& f) {
  std::string out;
  out.reserve(s.size());
  const std::vector<uint32_t> cps = code_points(s);
  for (size_t i = 0; i < cps.size(); ++i) unicode::append_utf8(out, f(i, cps));
  return out;
}

}  // namespace

std::string py_upper(std::string_view s) {
  return map_code_points(s, [](size_t i, const auto& cps) { return to_upper(cps[i]); });
}

std::string py_lower(std::string_view s) {
  return map_code_points(s, [](size_t i, const auto& cps) { return to_lower(cps[i]); });
}

std::string py_title(std::string_view s) {
  // Python: a letter after a cased letter is lowered, any other letter is uppered.
  return map_code_points(s, [](size_t i, const auto& cps) {
    const bool after_cased = i > 0 && is_cased_letter(cps[i - 1]);
    return after_cased ? to_lower(cps[i]) : to_upper(cps[i]);
  });
}

std::string py_capitalize(std::string_view s) {
  return map_code_points(
      s, [](size_t i, const auto& cps) { return i == 0 ? to_upper(cps[i]) : to_lower(cps[i]); });
}

}  // namespace k25::jinja
