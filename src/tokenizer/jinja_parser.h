// Jinja parser: tokens to the statement tree, with Jinja2's grammar and operator precedence.
#pragma once

#include <string_view>

#include "tokenizer/jinja_ast.h"

namespace k25::jinja {

// Throws TemplateError (Syntax) with the line for malformed templates, unknown tags, unknown
// filters or tests outside `if` branches (Jinja2 reports those at compile time), and nesting
// deeper than a fixed limit.
Body parse_template(std::string_view source);

}  // namespace k25::jinja
