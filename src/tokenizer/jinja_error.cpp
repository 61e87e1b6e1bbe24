#include "tokenizer/jinja_error.h"

namespace k25::jinja {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Syntax:
      return "TemplateSyntaxError";
    case ErrorKind::Raised:
      return "TemplateError";
    case ErrorKind::Type:
      return "TypeError";
    case ErrorKind::Undefined:
      return "UndefinedError";
    case ErrorKind::Security:
      return "SecurityError";
    case ErrorKind::Value:
      return "ValueError";
    case ErrorKind::Limit:
      return "LimitError";
  }
  return "TemplateError";
}

namespace {

std::string full_message(ErrorKind kind, const std::string& message, int line) {
  std::string out = concat("template ", error_kind_name(kind));
  if (line > 0) out += concat(" at line ", line);
  out += ": ";
  // One line: a raised message may span several.
  for (char c : message) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

}  // namespace

TemplateError::TemplateError(ErrorKind kind, std::string message, int line)
    : Error(full_message(kind, message, line)),
      kind_(kind),
      message_(std::move(message)),
      line_(line) {}

TemplateError TemplateError::at_line(int line) const {
  return TemplateError(kind_, message_, line_ > 0 ? line_ : line);
}

}  // namespace k25::jinja
