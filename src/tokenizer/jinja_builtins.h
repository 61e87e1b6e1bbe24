// The filters, tests, methods and globals of the template engine (Jinja2's defaults that chat
// templates use, plus transformers' tojson, raise_exception and strftime_now).
#pragma once

#include <string_view>

#include "tokenizer/jinja_ast.h"

namespace k25::jinja {

FilterFn find_filter(std::string_view name);  // nullptr when unknown
TestFn find_test(std::string_view name);      // nullptr when unknown

// obj.name for a built-in method of strings, dicts and lists (a bound callable), or undefined.
Value method_of(const Value& obj, const std::string& name);

// Helpers shared by the builtins and the interpreter.
const Value* named_arg(CallArgs& args, std::string_view name);
// Positional argument i, else the keyword `name`, else nullptr.
const Value* arg_at(CallArgs& args, size_t i, std::string_view name);

}  // namespace k25::jinja
