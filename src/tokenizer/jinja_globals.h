// The global functions templates call: range, dict, namespace (Jinja2's) and transformers'
// raise_exception and strftime_now.
#pragma once

#include "tokenizer/jinja_interpreter.h"

namespace k25::jinja {

Variables make_globals(Interpreter& interp);

// Python's time.strftime in the C locale (English month and day names).
std::string strftime_c(const std::string& format, const std::tm& tm);

}  // namespace k25::jinja
