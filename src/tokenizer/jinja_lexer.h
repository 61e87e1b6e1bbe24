// Jinja lexer with the environment Hugging Face uses: trim_blocks, lstrip_blocks, no
// keep_trailing_newline. Whitespace control ({%- -%}, {%+) and comments are resolved here, so
// the parser sees only data, tags and expression tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k25::jinja {

enum class TokenKind {
  Data,        // template text between tags
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text: the unescaped value
  Integer,
  Float,
  Operator,  // text: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  End,
};

struct Token {
  TokenKind kind;
  std::string text;
  int line;
};

// Throws TemplateError (Syntax) for an unterminated tag, comment or string, or a stray character.
std::vector<Token> lex_template(std::string_view source);

}  // namespace k25::jinja
