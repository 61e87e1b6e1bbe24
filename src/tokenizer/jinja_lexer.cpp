#include "tokenizer/jinja_lexer.h"

#include <cctype>

#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_text.h"
#include "tokenizer/unicode.h"

namespace k25::jinja {

namespace {

// Jinja splits the source into lines and joins them with "\n": \r\n and \r become \n, and one
// trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's rstrip()/lstrip() of Unicode whitespace on a byte range.
size_t rstrip_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    const unicode::Utf8Step step = unicode::decode_utf8(s, start);
    if (!step.valid || start + step.length != end || !is_python_space(step.codepoint)) break;
    end = start;
  }
  return end;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    if (!step.valid || !is_python_space(step.codepoint)) break;
    pos += step.length;
  }
  return pos;
}

bool all_space(std::string_view s) {
  return skip_space(s, 0) == s.size();
}

void append_utf8_escape(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = unicode::kReplacementChar;
  unicode::append_utf8(out, cp);
}

// Python's "unicode-escape" decoding of a string literal's body; unknown escapes stay as written.
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out += c;
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t n) {
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        const char h = i + k < body.size() ? body[i + k] : '\0';
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          raise(ErrorKind::Syntax, "truncated escape in a string at line ", line);
        }
        v = v * 16 +
            static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                      ? h - '0'
                                      : (std::tolower(static_cast<unsigned char>(h)) - 'a' + 10));
      }
      i += n;
      return v;
    };
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case '\n':
        break;
      case 'x':
        append_utf8_escape(out, hex(2));
        break;
      case 'u':
        append_utf8_escape(out, hex(4));
        break;
      case 'U':
        append_utf8_escape(out, hex(8));
        break;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          append_utf8_escape(out, v);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t start = next_tag(pos_);
      std::string_view text(src_.data() + pos_,
                            (start == std::string::npos ? src_.size() : start) - pos_);
      if (start == std::string::npos) {
        emit_data(text);
        pos_ = src_.size();
        break;
      }
      const char type = src_[start + 1];
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        text = text.substr(0, rstrip_end(text));
      } else if (sign != '+' && type != '{') {
        // lstrip_blocks: spaces between a line start and a block or comment tag are dropped.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_space(text.substr(l_pos))) {
          text = text.substr(0, l_pos);
        }
      }
      emit_data(text);
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        lex_comment();
      } else {
        lex_tag(type == '{');
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({TokenKind::End, "", line_at(pos_)});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
    }
    return std::string::npos;
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) tokens_.push_back({TokenKind::Data, std::string(text), line_at(pos_)});
  }

  // The 1-based line of a source offset (offsets are asked for in increasing order).
  int line_at(size_t p) {
    for (; counted_ < p && counted_ < src_.size(); ++counted_) line_ += src_[counted_] == '\n';
    return line_;
  }

  // After a closing delimiter: "-" strips all following whitespace; a block or comment without
  // "+" drops one newline (trim_blocks).
  void after_close(char sign, bool is_block) {
    if (sign == '-') {
      pos_ = skip_space(src_, pos_);
    } else if (is_block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void lex_comment() {
    const size_t close = src_.find("#}", pos_);
    if (close == std::string::npos)
      raise(ErrorKind::Syntax, "unterminated comment at line ", line_at(pos_));
    const char sign =
        close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
    pos_ = close + 2;
    after_close(sign, true);
  }

  // The closing delimiter at pos_, if any: returns its sign ('-', '+' or ' ') and length.
  bool at_close(bool variable, char& sign, size_t& length) const {
    const char* close = variable ? "}}" : "%}";
    for (char s : {'-', '+'}) {
      if (s == '+' && variable) continue;
      if (pos_ < src_.size() && src_[pos_] == s && src_.compare(pos_ + 1, 2, close) == 0) {
        sign = s;
        length = 3;
        return true;
      }
    }
    if (src_.compare(pos_, 2, close) == 0) {
      sign = ' ';
      length = 2;
      return true;
    }
    return false;
  }

  void lex_tag(bool variable) {
    const int open_line = line_at(pos_);
    tokens_.push_back({variable ? TokenKind::VarBegin : TokenKind::BlockBegin, "", open_line});
    int depth = 0;  // brackets: "}}" inside a dict literal does not close a {{ tag
    for (;;) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) {
        ++pos_;
      }
      if (pos_ >= src_.size()) {
        raise(ErrorKind::Syntax, "unexpected end of template in a tag opened at line ", open_line);
      }
      char sign;
      size_t length;
      if (depth == 0 && at_close(variable, sign, length)) {
        tokens_.push_back({variable ? TokenKind::VarEnd : TokenKind::BlockEnd, "", line_at(pos_)});
        pos_ += length;
        after_close(sign, !variable);
        return;
      }
      const char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
          ++e;
        tokens_.push_back({TokenKind::Name, src_.substr(pos_, e - pos_), line_at(pos_)});
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(depth);
      }
    }
  }

  void lex_number() {
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
      return p;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, text, line_at(pos_)});
    pos_ = e;
  }

  void lex_string(char quote) {
    const int start_line = line_at(pos_);
    size_t e = pos_ + 1;
    while (e < src_.size() && src_[e] != quote) {
      if (src_[e] == '\\') ++e;
      ++e;
    }
    if (e >= src_.size()) raise(ErrorKind::Syntax, "unterminated string at line ", start_line);
    tokens_.push_back({TokenKind::String,
                       unescape(std::string_view(src_).substr(pos_ + 1, e - pos_ - 1), start_line),
                       start_line});
    pos_ = e + 1;
  }

  void lex_operator(int& depth) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenKind::Operator, op, line_at(pos_)});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
      raise(ErrorKind::Syntax, "unexpected character '", c, "' at line ", line_at(pos_));
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back({TokenKind::Operator, std::string(1, c), line_at(pos_)});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t counted_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace k25::jinja
