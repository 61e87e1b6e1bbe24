#include "tokenizer/jinja_template.h"

#include "tokenizer/jinja_parser.h"

namespace k25::jinja {

Template::Template(std::string_view source) : body_(parse_template(source)) {}

Text Template::render(const Variables& vars, const RenderOptions& options) const {
  Interpreter interp(options, vars);
  return interp.render(body_);
}

}  // namespace k25::jinja
