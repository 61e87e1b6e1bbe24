// Runs a parsed template: Jinja2's scoping (for bodies and macros get their own scope, if bodies
// do not, namespace attributes are shared), loop controls, macros, and k25's limits on work.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.h"

namespace k25::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // the rendered text (and any captured block)
  size_t max_work_bytes = size_t{256}
                          << 20;   // bytes of all strings and lists built while rendering
  uint64_t max_steps = 2'000'000;  // statements run, loop iterations, calls
  int max_call_depth = 64;         // nested macro calls
};

struct RenderOptions {
  // The time strftime_now() formats (local time; tests fix it).
  std::function<std::tm()> now;
  RenderLimits limits;
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Interpreter {
 public:
  Interpreter(const RenderOptions& options, const Variables& vars);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  Text render(const Body& body);

  // Jinja's attribute and item lookup (`x.y` tries the attribute, then the item; `x[y]` the
  // other way round); undefined when neither exists, UndefinedError on an undefined object.
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value call(const Value& callee, CallArgs& args);
  bool run_test(const std::string& name, const Value& v, CallArgs& args);
  Value run_filter(const std::string& name, const Value& v, CallArgs& args);
  // The items of an iterable (list, tuple, dict keys, string characters; undefined is empty).
  List iterate(const Value& v);
  // Counts bytes of built strings/lists against max_work_bytes.
  void charge(size_t bytes);
  std::tm now() const;

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const std::vector<ExprPtr>& args, size_t first,
                     const std::vector<std::pair<std::string, ExprPtr>>& kwargs);
  Value apply_filters(const std::vector<FilterCall>& filters, Value v);
  Value make_macro(const Stmt& s);
  Text capture(const Body& body);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  void assign_target(const Expr& target, const Value& v);
  void emit(const Text& t);
  void step();

  const RenderOptions& options_;
  std::shared_ptr<Frame> frame_;
  Variables globals_;
  // Frames captured by macros and namespaces made: cleared at the end so that reference cycles
  // (a macro stored in its own scope, a namespace holding itself) are freed.
  std::vector<std::shared_ptr<Frame>> macro_frames_;
  std::vector<Value> namespaces_;
  std::vector<Text> outputs_;  // the innermost capture last
  uint64_t steps_ = 0;
  size_t work_bytes_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

}  // namespace k25::jinja
