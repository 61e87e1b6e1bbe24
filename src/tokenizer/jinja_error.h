// Template errors: one class for every failure of parsing or rendering a Jinja template, with the
// Python exception class the reference (Jinja2) would raise and the template line where known.
#pragma once

#include <string>

#include "core/error.h"

namespace k25::jinja {

enum class ErrorKind {
  Syntax,     // TemplateSyntaxError: the template does not parse
  Raised,     // TemplateError from raise_exception(): the message is the template's own text
  Type,       // TypeError: an operation on values of the wrong type
  Undefined,  // UndefinedError: use of an undefined value beyond printing/testing it
  Security,   // SecurityError: the immutable sandbox forbids the operation
  Value,      // ValueError / ZeroDivisionError / OverflowError and other runtime failures
  Limit,      // a k25 limit (output size, steps, recursion depth) was reached
};

const char* error_kind_name(ErrorKind kind);

class TemplateError : public Error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0);
  ErrorKind kind() const { return kind_; }
  // The message without class name or line: for Raised, exactly the template's text.
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  // The same error with the line filled in when it was not known where it was thrown.
  TemplateError at_line(int line) const;

 private:
  ErrorKind kind_;
  std::string message_;
  int line_;
};

template <typename... Parts>
[[noreturn]] void raise(ErrorKind kind, const Parts&... parts) {
  throw TemplateError(kind, concat(parts...));
}

}  // namespace k25::jinja
