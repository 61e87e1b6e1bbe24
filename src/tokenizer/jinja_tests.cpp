// Jinja2's tests (`x is defined`, `x is string`, ...) with Python's type checks.
#include <string_view>
#include <unordered_map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_operators.h"

namespace k25::jinja {

namespace {

const Value& other(CallArgs& args, const char* test) {
  const Value* v = arg_at(args, 0, "other");
  if (!v) raise(ErrorKind::Type, "test '", test, "' takes an argument");
  return *v;
}

bool is_case(const Value& v, bool upper) {
  if (!v.is_string()) return false;
  const std::string& s = v.str();
  bool cased = false;
  for (char c : s) {
    if (c >= 'a' && c <= 'z') {
      if (upper) return false;
      cased = true;
    } else if (c >= 'A' && c <= 'Z') {
      if (!upper) return false;
      cased = true;
    }
  }
  return cased;
}

bool compare(const std::string& op, const Value& v, CallArgs& args) {
  return binary_op(op, v, other(args, op.c_str())).truthy();
}

using Table = std::unordered_map<std::string_view, TestFn>;

const Table& tests() {
  static const Table t = {
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::Bool; }},
      {"true", [](Interpreter&, const Value& v,
                  CallArgs&) { return v.kind() == Kind::Bool && v.as_bool(); }},
      {"false", [](Interpreter&, const Value& v,
                   CallArgs&) { return v.kind() == Kind::Bool && !v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::Int; }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::Float; }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }},
      {"iterable",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_dict() ||
                (v.is_list() && v.seq_kind() != SeqKind::Generator);
       }},
      {"callable",
       [](Interpreter&, const Value& v, CallArgs&) { return v.kind() == Kind::Callable; }},
      {"escaped", [](Interpreter&, const Value& v, CallArgs&) { return v.is_markup(); }},
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return is_case(v, false); }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return is_case(v, true); }},
      {"odd",
       [](Interpreter&, const Value& v, CallArgs&) {
         if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
           raise(ErrorKind::Type, "odd needs an integer");
         return v.as_int() % 2 != 0;
       }},
      {"even",
       [](Interpreter&, const Value& v, CallArgs&) {
         if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
           raise(ErrorKind::Type, "even needs an integer");
         return v.as_int() % 2 == 0;
       }},
      {"divisibleby",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& n = other(a, "divisibleby");
         return binary_op("%", v, n).truthy() == false;
       }},
      {"sameas",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& o = other(a, "sameas");
         if (v.kind() != o.kind()) return false;
         if (v.kind() == Kind::None || v.kind() == Kind::Undefined) return true;
         if (v.kind() == Kind::Bool) return v.as_bool() == o.as_bool();
         return v.is_shared_with(o) || (v.is_number() && values_equal(v, o));
       }},
      {"in", [](Interpreter&, const Value& v, CallArgs& a) { return compare("in", v, a); }},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return compare("==", v, a); }},
      {"equalto", [](Interpreter&, const Value& v, CallArgs& a) { return compare("==", v, a); }},
      {"==", [](Interpreter&, const Value& v, CallArgs& a) { return compare("==", v, a); }},
      {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return compare("!=", v, a); }},
      {"!=", [](Interpreter&, const Value& v, CallArgs& a) { return compare("!=", v, a); }},
      {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return compare("<", v, a); }},
      {"lessthan", [](Interpreter&, const Value& v, CallArgs& a) { return compare("<", v, a); }},
      {"<", [](Interpreter&, const Value& v, CallArgs& a) { return compare("<", v, a); }},
      {"le", [](Interpreter&, const Value& v, CallArgs& a) { return compare("<=", v, a); }},
      {"<=", [](Interpreter&, const Value& v, CallArgs& a) { return compare("<=", v, a); }},
      {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return compare(">", v, a); }},
      {"greaterthan", [](Interpreter&, const Value& v, CallArgs& a) { return compare(">", v, a); }},
      {">", [](Interpreter&, const Value& v, CallArgs& a) { return compare(">", v, a); }},
      {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return compare(">=", v, a); }},
      {">=", [](Interpreter&, const Value& v, CallArgs& a) { return compare(">=", v, a); }},
  };
  return t;
}

}  // namespace

TestFn find_test(std::string_view name) {
  const auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace k25::jinja
