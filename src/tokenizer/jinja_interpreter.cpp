#include "tokenizer/jinja_interpreter.h"

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_globals.h"
#include "tokenizer/jinja_operators.h"

namespace k25::jinja {

namespace {

struct DepthGuard {
  DepthGuard(int& depth, int limit) : depth_(depth) {
    if (++depth_ > limit) raise(ErrorKind::Limit, "macro calls nest deeper than ", limit);
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

std::optional<int64_t> slice_index(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (v.kind() != Kind::Int && v.kind() != Kind::Bool) {
    raise(ErrorKind::Type, "slice indices must be integers or None");
  }
  return v.as_int();
}

}  // namespace

Interpreter::Interpreter(const RenderOptions& options, const Variables& vars)
    : options_(options), frame_(std::make_shared<Frame>()), globals_(make_globals(*this)) {
  frame_->vars = vars;
}

Interpreter::~Interpreter() {
  for (const auto& f : macro_frames_) f->vars.clear();
  for (const Value& ns : namespaces_) ns.namespace_attrs().clear();
  frame_->vars.clear();
}

std::tm Interpreter::now() const {
  if (options_.now) return options_.now();
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

void Interpreter::step() {
  if (++steps_ > options_.limits.max_steps) {
    raise(ErrorKind::Limit, "the template ran more than ", options_.limits.max_steps, " steps");
  }
}

void Interpreter::charge(size_t bytes) {
  work_bytes_ += bytes;
  if (work_bytes_ > options_.limits.max_work_bytes) {
    raise(ErrorKind::Limit, "the template built more than ", options_.limits.max_work_bytes,
          " bytes of strings and lists");
  }
}

Text Interpreter::render(const Body& body) {
  outputs_.emplace_back();
  try {
    exec(body);
  } catch (const TemplateError& e) {
    throw e.at_line(line_);
  }
  Text out = std::move(outputs_.back());
  outputs_.pop_back();
  return out;
}

void Interpreter::emit(const Text& t) {
  Text& out = outputs_.back();
  out.append(t);
  if (out.bytes.size() > options_.limits.max_output_bytes) {
    raise(ErrorKind::Limit, "the output is larger than ", options_.limits.max_output_bytes,
          " bytes");
  }
}

Text Interpreter::capture(const Body& body) {
  outputs_.emplace_back();
  struct Pop {
    std::vector<Text>& v;
    ~Pop() { v.pop_back(); }
  } pop{outputs_};
  exec(body);
  return std::move(outputs_.back());
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
    for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it) {
      if (it->first == name) return it->second;
    }
  }
  for (const auto& [n, v] : globals_) {
    if (n == name) return v;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value v) {
  for (auto& [n, val] : frame_->vars) {
    if (n == name) {
      val = std::move(v);
      return;
    }
  }
  frame_->vars.emplace_back(name, std::move(v));
}

void Interpreter::assign_target(const Expr& target, const Value& v) {
  if (target.kind == Expr::Kind::Name) {
    assign(target.name, v);
    return;
  }
  if (target.kind == Expr::Kind::GetAttr) {
    const Value ns = lookup(target.args[0]->name);
    if (ns.kind() != Kind::Namespace) {
      raise(ErrorKind::Type, "cannot assign attribute on non-namespace object");
    }
    Dict& attrs = ns.namespace_attrs();
    for (auto& [k, val] : attrs) {
      if (k.str() == target.name) {
        val = v;
        return;
      }
    }
    attrs.emplace_back(Value::string(target.name), v);
    return;
  }
  // Tuple unpacking.
  const List items = iterate(v);
  if (items.size() != target.args.size()) {
    raise(ErrorKind::Value, items.size() < target.args.size() ? "not enough" : "too many",
          " values to unpack (expected ", target.args.size(), ", got ", items.size(), ")");
  }
  for (size_t i = 0; i < items.size(); ++i) assign_target(*target.args[i], items[i]);
}

List Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return v.items();
    case Kind::Dict: {
      List keys;
      for (const auto& e : v.entries()) keys.push_back(e.first);
      return keys;
    }
    case Kind::String: {
      List chars;
      const std::vector<uint32_t> cps = code_points(v.str());
      for (size_t i = 0; i < cps.size(); ++i) {
        Text t;
        t.append_derived(from_code_points(cps, i, i + 1), v.text().has_data());
        chars.push_back(Value::string(std::move(t)));
      }
      return chars;
    }
    default:
      raise(ErrorKind::Type, "'", v.type_name(), "' object is not iterable");
  }
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::Text:
      emit(Text(s.text));
      return Flow::Normal;
    case Stmt::Kind::Print: {
      const Value v = eval(*s.expr);
      line_ = s.line;
      emit(py_str(v));
      return Flow::Normal;
    }
    case Stmt::Kind::If:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        if (eval(*s.conditions[i]).truthy()) return exec(s.bodies[i]);
      }
      return exec(s.else_body);
    case Stmt::Kind::For:
      return exec_for(s);
    case Stmt::Kind::Set:
      exec_set(s);
      return Flow::Normal;
    case Stmt::Kind::SetBlock: {
      Text captured = capture(s.bodies[0]);
      assign(s.targets[0]->name, apply_filters(s.filters, Value::string(std::move(captured))));
      return Flow::Normal;
    }
    case Stmt::Kind::Macro:
      assign(s.text, make_macro(s));
      return Flow::Normal;
    case Stmt::Kind::FilterBlock: {
      Text captured = capture(s.bodies[0]);
      emit(py_str(apply_filters(s.filters, Value::string(std::move(captured)))));
      return Flow::Normal;
    }
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s) {
  const Value v = eval(*s.expr);
  assign_target(*s.targets[0], v);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  const Value iterable = eval(*s.expr);
  List items = iterate(iterable);
  auto saved = frame_;
  frame_ = std::make_shared<Frame>();
  frame_->parent = saved;
  struct Restore {
    std::shared_ptr<Frame>& f;
    std::shared_ptr<Frame> saved;
    ~Restore() { f = saved; }
  } restore{frame_, saved};
  if (s.condition) {
    // The loop filter sees the loop variables but not `loop`.
    List kept;
    for (const Value& item : items) {
      step();
      assign_target(*s.targets[0], item);
      if (eval(*s.condition).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body);
    return Flow::Normal;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step();
    assign_target(*s.targets[0], items[static_cast<size_t>(i)]);
    Dict loop;
    loop.reserve(12);
    auto put = [&](const char* k, Value v) { loop.emplace_back(Value::string(k), std::move(v)); };
    put("index", Value::integer(i + 1));
    put("index0", Value::integer(i));
    put("revindex", Value::integer(n - i));
    put("revindex0", Value::integer(n - i - 1));
    put("first", Value::boolean(i == 0));
    put("last", Value::boolean(i == n - 1));
    put("length", Value::integer(n));
    put("depth", Value::integer(1));
    put("depth0", Value::integer(0));
    put("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
    put("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
    put("cycle", Value::callable("cycle", [i](CallArgs& a) {
          if (a.positional.empty()) raise(ErrorKind::Type, "no items for cycling given");
          return a.positional[static_cast<size_t>(i) % a.positional.size()];
        }));
    assign("loop", Value::dict(std::move(loop)));
    if (exec(s.bodies[0]) == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interpreter::make_macro(const Stmt& s) {
  std::shared_ptr<Frame> closure = frame_;
  macro_frames_.push_back(closure);
  const Stmt* def = &s;
  return Value::callable(s.text, [this, closure, def](CallArgs& args) {
    step();
    DepthGuard guard(call_depth_, options_.limits.max_call_depth);
    auto frame = std::make_shared<Frame>();
    frame->parent = closure;
    List varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < def->params.size()) {
        frame->vars.emplace_back(def->params[i], args.positional[i]);
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    Dict kwargs;
    for (auto& [name, v] : args.named) {
      bool is_param = false;
      for (const std::string& p : def->params) is_param |= p == name;
      if (is_param) {
        frame->vars.emplace_back(name, v);
      } else {
        kwargs.emplace_back(Value::string(name), v);
      }
    }
    auto saved = frame_;
    const int saved_line = line_;
    frame_ = frame;
    struct Restore {
      std::shared_ptr<Frame>& f;
      std::shared_ptr<Frame> saved;
      ~Restore() { f = saved; }
    } restore{frame_, saved};
    for (size_t i = 0; i < def->params.size(); ++i) {
      bool bound = false;
      for (const auto& [n, v] : frame->vars) bound |= n == def->params[i];
      if (bound) continue;
      frame->vars.emplace_back(def->params[i], def->defaults[i] ? eval(*def->defaults[i])
                                                                : Value::undefined(def->params[i]));
    }
    frame->vars.emplace_back("varargs", Value::list(std::move(varargs)));
    frame->vars.emplace_back("kwargs", Value::dict(std::move(kwargs)));
    Text out = capture(def->bodies[0]);
    line_ = saved_line;
    return Value::string(std::move(out));
  });
}

Value Interpreter::apply_filters(const std::vector<FilterCall>& filters, Value v) {
  for (const FilterCall& f : filters) {
    line_ = f.line;
    if (!f.fn) raise(ErrorKind::Syntax, "No filter named '", f.name, "'.");
    CallArgs args = eval_args(f.args, 0, f.kwargs);
    v = f.fn(*this, v, args);
  }
  return v;
}

CallArgs Interpreter::eval_args(const std::vector<ExprPtr>& args, size_t first,
                                const std::vector<std::pair<std::string, ExprPtr>>& kwargs) {
  CallArgs out;
  for (size_t i = first; i < args.size(); ++i) out.positional.push_back(eval(*args[i]));
  for (const auto& [name, e] : kwargs) out.named.emplace_back(name, eval(*e));
  return out;
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind() == Kind::Namespace) {
    const Value* v = obj.find(std::string_view(name));
    return v ? *v : Value::undefined(name);
  }
  Value m = method_of(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_dict()) {
    const Value* v = obj.find(std::string_view(name));
    if (v) return *v;
  }
  return Value::undefined(name);
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict() || obj.kind() == Kind::Namespace) {
    const Value* v = obj.find(key);
    if (v) return *v;
  } else if ((key.kind() == Kind::Int || key.kind() == Kind::Bool) &&
             (obj.is_string() || (obj.is_list() && (obj.seq_kind() == SeqKind::List ||
                                                    obj.seq_kind() == SeqKind::Tuple)))) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::vector<uint32_t> cps = code_points(obj.str());
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        Text t;
        t.append_derived(from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1),
                         obj.text().has_data());
        return Value::string(std::move(t));
      }
    } else {
      const int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
    }
  }
  if (key.is_string()) {
    if (obj.kind() == Kind::Namespace) return Value::undefined(key.str());
    Value m = method_of(obj, key.str());
    if (!m.is_undefined()) return m;
    return Value::undefined(key.str());
  }
  return Value::undefined();
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (callee.kind() != Kind::Callable) {
    raise(ErrorKind::Type, "'", callee.type_name(), "' object is not callable");
  }
  Value result = callee.function().fn(args);
  if (result.is_string()) charge(result.str().size());
  if (result.kind() == Kind::Namespace) namespaces_.push_back(result);
  return result;
}

bool Interpreter::run_test(const std::string& name, const Value& v, CallArgs& args) {
  const TestFn fn = find_test(name);
  if (!fn) raise(ErrorKind::Syntax, "No test named '", name, "'.");
  return fn(*this, v, args);
}

Value Interpreter::run_filter(const std::string& name, const Value& v, CallArgs& args) {
  const FilterFn fn = find_filter(name);
  if (!fn) raise(ErrorKind::Syntax, "No filter named '", name, "'.");
  return fn(*this, v, args);
}

Value Interpreter::eval_binary(const Expr& e) {
  const Value a = eval(*e.args[0]);
  const Value b = eval(*e.args[1]);
  line_ = e.line;
  Value r = binary_op(e.name, a, b);
  if (r.is_string()) charge(r.str().size());
  if (r.is_list()) charge(r.items().size() * sizeof(Value));
  return r;
}

Value Interpreter::eval_call(const Expr& e) {
  const Expr& callee = *e.args[0];
  Value fn = eval(callee);
  CallArgs args = eval_args(e.args, 1, e.kwargs);
  line_ = e.line;
  return call(fn, args);
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal:
      return e.literal;
    case Expr::Kind::Name:
      return lookup(e.name);
    case Expr::Kind::ListLit:
    case Expr::Kind::TupleLit: {
      List items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) items.push_back(eval(*a));
      return Value::list(std::move(items),
                         e.kind == Expr::Kind::TupleLit ? SeqKind::Tuple : SeqKind::List);
    }
    case Expr::Kind::DictLit: {
      Dict entries;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i]);
        Value v = eval(*e.args[i + 1]);
        bool replaced = false;
        for (auto& [ek, ev] : entries) {
          if (values_equal(ek, k)) {
            ev = v;
            replaced = true;
          }
        }
        if (!replaced) entries.emplace_back(std::move(k), std::move(v));
      }
      return Value::dict(std::move(entries));
    }
    case Expr::Kind::Not:
      return Value::boolean(!eval(*e.args[0]).truthy());
    case Expr::Kind::Negate: {
      const Value v = eval(*e.args[0]);
      line_ = e.line;
      return negate(v);
    }
    case Expr::Kind::Plus: {
      const Value v = eval(*e.args[0]);
      line_ = e.line;
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number())
        raise(ErrorKind::Type, "bad operand type for unary +: '", v.type_name(), "'");
      return v.kind() == Kind::Bool ? Value::integer(v.as_int()) : v;
    }
    case Expr::Kind::Binary:
      return eval_binary(e);
    case Expr::Kind::And: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    case Expr::Kind::Or: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    case Expr::Kind::Conditional:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      return e.args.size() > 2 ? eval(*e.args[2]) : Value::undefined();
    case Expr::Kind::GetAttr: {
      const Value obj = eval(*e.args[0]);
      line_ = e.line;
      return get_attr(obj, e.name);
    }
    case Expr::Kind::GetItem: {
      const Value obj = eval(*e.args[0]);
      const Value key = eval(*e.args[1]);
      line_ = e.line;
      return get_item(obj, key);
    }
    case Expr::Kind::Slice: {
      const Value obj = eval(*e.args[0]);
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[static_cast<size_t>(i) + 1])
          parts[i] = eval(*e.args[static_cast<size_t>(i) + 1]);
      }
      line_ = e.line;
      if (obj.is_undefined()) undefined_error(obj);
      return slice_value(obj, slice_index(parts[0]), slice_index(parts[1]), slice_index(parts[2]));
    }
    case Expr::Kind::Call:
      return eval_call(e);
    case Expr::Kind::Filter: {
      const Value v = eval(*e.args[0]);
      CallArgs args = eval_args(e.args, 1, e.kwargs);
      line_ = e.line;
      if (!e.filter) raise(ErrorKind::Syntax, "No filter named '", e.name, "'.");
      Value r = e.filter(*this, v, args);
      if (r.is_string()) charge(r.str().size());
      if (r.is_list()) charge(r.items().size() * sizeof(Value));
      return r;
    }
    case Expr::Kind::Test: {
      const Value v = eval(*e.args[0]);
      CallArgs args = eval_args(e.args, 1, e.kwargs);
      line_ = e.line;
      if (!e.test) raise(ErrorKind::Syntax, "No test named '", e.name, "'.");
      return Value::boolean(e.test(*this, v, args) != e.negated);
    }
  }
  return Value::undefined();
}

}  // namespace k25::jinja
