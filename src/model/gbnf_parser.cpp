#include "model/gbnf_parser.h"

#include <algorithm>

#include "core/error.h"
#include "model/grammar.h"
#include "tokenizer/unicode.h"

namespace k25 {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<GbnfRule> parse() {
    std::vector<GbnfRule> rules;
    for (;;) {
      skip_blank(true);
      if (at_end()) break;
      rules.push_back(parse_rule());
    }
    return rules;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  int depth_ = 0;  // open parentheses: inside them newlines are plain whitespace

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }

  std::pair<int, int> location(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    // Columns count characters, not bytes: skip UTF-8 continuation bytes.
    int column = 1;
    for (size_t i = line_starts_[line - 1]; i < offset && i < text_.size(); ++i)
      if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
    return {static_cast<int>(line), column};
  }

  template <typename... Parts>
  [[noreturn]] void error_at(size_t offset, const Parts&... parts) const {
    const auto [line, column] = location(offset);
    fail("grammar: line ", line, ", column ", column, ": ", parts...);
  }

  // Skips spaces, tabs and comments; newlines too when `newlines` (or inside parentheses).
  void skip_blank(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '\n' && (newlines || depth_ > 0)) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  GbnfRule parse_rule() {
    GbnfRule rule;
    std::tie(rule.line, rule.column) = location(pos_);
    const size_t start = pos_;
    rule.name = parse_name();
    if (rule.name.empty()) {
      error_at(start, "expected a rule name, found '", printable(peek()), "'");
    }
    skip_blank(false);
    if (text_.substr(pos_, 3) != "::=") {
      error_at(pos_, "expected '::=' after the rule name '", rule.name, "'");
    }
    pos_ += 3;
    skip_blank(true);
    rule.alternatives = parse_alternatives();
    if (!at_end() && peek() != '\n') {
      error_at(pos_, "unexpected '", printable(peek()), "' in rule '", rule.name, "'");
    }
    return rule;
  }

  GbnfAlternatives parse_alternatives() {
    GbnfAlternatives alternatives;
    alternatives.push_back(parse_sequence());
    for (;;) {
      // At the top level a rule may continue on a line that starts with '|'.
      const size_t before = pos_;
      if (depth_ == 0) skip_blank(true);
      if (peek() != '|') {
        pos_ = before;
        break;
      }
      ++pos_;
      skip_blank(true);
      alternatives.push_back(parse_sequence());
    }
    return alternatives;
  }

  GbnfSequence parse_sequence() {
    GbnfSequence sequence;
    for (;;) {
      skip_blank(false);
      const char c = peek();
      if (at_end() || c == '\n' || c == '|' || c == ')') break;
      GbnfItem item = parse_primary();
      parse_repetition(item);
      sequence.push_back(std::move(item));
    }
    return sequence;
  }

  GbnfItem parse_primary() {
    GbnfItem item;
    const size_t start = pos_;
    std::tie(item.line, item.column) = location(pos_);
    const char c = peek();
    if (c == '"') {
      item.kind = GbnfItem::Kind::Literal;
      ++pos_;
      for (;;) {
        if (at_end() || peek() == '\n') error_at(start, "unterminated string literal");
        if (peek() == '"') break;
        item.literal.push_back(parse_char());
      }
      ++pos_;
    } else if (c == '[') {
      item.kind = GbnfItem::Kind::CharClass;
      ++pos_;
      if (peek() == '^') {
        item.negated = true;
        ++pos_;
      }
      for (;;) {
        if (at_end() || peek() == '\n') error_at(start, "unterminated character class");
        if (peek() == ']') break;
        const char32_t lo = parse_char();
        char32_t hi = lo;
        if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
          const size_t range_start = pos_;
          ++pos_;
          hi = parse_char();
          if (hi < lo) error_at(range_start, "character range end is below its start");
        }
        item.ranges.emplace_back(lo, hi);
      }
      ++pos_;
    } else if (c == '.') {
      item.kind = GbnfItem::Kind::CharClass;
      item.negated = true;  // [^] : any character
      ++pos_;
    } else if (c == '(') {
      item.kind = GbnfItem::Kind::Group;
      ++pos_;
      ++depth_;
      skip_blank(true);
      item.group = parse_alternatives();
      skip_blank(true);
      if (peek() != ')') error_at(start, "unclosed '('");
      --depth_;
      ++pos_;
    } else if (is_name_char(c)) {
      item.kind = GbnfItem::Kind::RuleRef;
      item.name = parse_name();
      const size_t after = pos_;
      skip_blank(false);
      if (text_.substr(pos_, 3) == "::=") {
        error_at(start, "rule '", item.name, "' must start on a new line");
      }
      pos_ = after;
    } else {
      error_at(start, "unexpected '", printable(c), "'");
    }
    return item;
  }

  void parse_repetition(GbnfItem& item) {
    const size_t start = pos_;
    switch (peek()) {
      case '*':
        item.min = 0, item.max = -1;
        break;
      case '+':
        item.min = 1, item.max = -1;
        break;
      case '?':
        item.min = 0, item.max = 1;
        break;
      case '{': {
        ++pos_;
        skip_blank(false);
        item.min = peek() == ',' ? 0 : parse_count(start);
        skip_blank(false);
        if (peek() == ',') {
          ++pos_;
          skip_blank(false);
          item.max = peek() == '}' ? -1 : parse_count(start);
          skip_blank(false);
        } else {
          item.max = item.min;
        }
        if (peek() != '}') error_at(start, "repetition '{m,n}' is missing its '}'");
        if (item.max >= 0 && item.max < item.min)
          error_at(start, "repetition {", item.min, ",", item.max, "}: n is below m");
        break;
      }
      default:
        return;
    }
    ++pos_;
    const char next = peek();
    if (next == '*' || next == '+' || next == '?' || next == '{') {
      error_at(pos_, "a repetition operator cannot follow another; use parentheses");
    }
  }

  int parse_count(size_t construct_start) {
    const size_t start = pos_;
    long long value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + (peek() - '0');
      if (value > kMaxGrammarRepetition)
        error_at(construct_start, "repetition count above the limit of ", kMaxGrammarRepetition);
      ++pos_;
    }
    if (pos_ == start) error_at(start, "expected a number in repetition '{m,n}'");
    return static_cast<int>(value);
  }

  // One character of a literal or class: an escape or a UTF-8 encoded character.
  char32_t parse_char() {
    const size_t start = pos_;
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '0':
          return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<unsigned char>(e);
        case 'x':
          return parse_hex(start, 2);
        case 'u':
          return parse_hex(start, 4);
        case 'U':
          return parse_hex(start, 8);
        default:
          error_at(start, "unknown escape '\\", printable(e), "'");
      }
    }
    const unicode::Utf8Step step = unicode::decode_utf8(text_, pos_);
    if (!step.valid) error_at(start, "invalid UTF-8");
    pos_ += step.length;
    return step.codepoint;
  }

  char32_t parse_hex(size_t start, int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = hex_value(peek());
      if (d < 0) error_at(start, "escape needs ", digits, " hex digits");
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) error_at(start, "escape is above U+10FFFF");
    if (value >= 0xD800 && value <= 0xDFFF)
      error_at(start, "escape names a UTF-16 surrogate, which is not a character");
    return value;
  }

  static std::string printable(char c) {
    if (c == '\0') return "end of input";
    if (static_cast<unsigned char>(c) < 0x20) return concat("\\x", std::hex, static_cast<int>(c));
    return std::string(1, c);
  }
};

}  // namespace

std::vector<GbnfRule> parse_gbnf(std::string_view text) {
  if (text.size() > kMaxGrammarTextBytes) {
    fail("grammar: ", text.size(), " bytes of text; at most ", kMaxGrammarTextBytes);
  }
  return Parser(text).parse();
}

}  // namespace k25
