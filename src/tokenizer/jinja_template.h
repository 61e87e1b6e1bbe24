// A parsed Jinja template, rendered with Jinja2's semantics as Hugging Face's
// apply_chat_template configures them (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, transformers' tojson/raise_exception/strftime_now).
// Parse once, render many times; rendering is const and thread-safe.
#pragma once

#include <string_view>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_interpreter.h"

namespace k25::jinja {

class Template {
 public:
  // Throws TemplateError (Syntax) when the template does not parse.
  explicit Template(std::string_view source);
  // Throws TemplateError for runtime errors, raise_exception() and exceeded limits.
  Text render(const Variables& vars, const RenderOptions& options = {}) const;

 private:
  Body body_;
};

}  // namespace k25::jinja
