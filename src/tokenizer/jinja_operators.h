// Python's operators on template values: arithmetic, +/~ concatenation (with markupsafe's
// escaping when one side is Markup), comparisons, `in`, slicing and %-formatting.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja_value.h"

namespace k25::jinja {

// op is one of + - * / // % ** ~ == != < <= > >= in "not in".
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
// markupsafe.escape(): & < > " ' become entities.
Text html_escape(const Text& t);
// obj[start:stop:step] for strings (by code point), lists and tuples.
Value slice_value(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step);
// fmt % args (%s %r %d %i %f %%), the printf-style formatting of Python strings.
Value percent_format(const Value& fmt, const Value& args);
// The error for an operation on an undefined value.
[[noreturn]] void undefined_error(const Value& v);

}  // namespace k25::jinja
