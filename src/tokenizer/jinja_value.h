// The dynamic values of the template engine, with Python's semantics where Jinja2 uses them:
// truthiness, equality, ordering, str() and repr() printing. Lists and dicts are immutable and
// shared (the sandbox forbids mutating them); a namespace is the one mutable object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_text.h"

namespace k25::jinja {

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable, Namespace };
// A sequence is a list, a tuple (printed with parentheses) or a one-shot generator (what map,
// select, items ... return in Jinja2: iterable, but tojson/length/indexing of it fail).
// A dict view (keys(), values(), items()) has a length but is not JSON.
enum class SeqKind { List, Tuple, Generator, View };

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<Value, Value>>;  // insertion order, as Python dicts

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};
using Function = std::function<Value(CallArgs&)>;

struct Callable {
  std::string name;
  Function fn;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double d);
  static Value string(Text t, bool markup = false);
  static Value string(std::string s) { return string(Text(std::move(s))); }
  static Value list(List items, SeqKind kind = SeqKind::List);
  static Value dict(Dict entries);
  static Value callable(std::string name, Function fn);
  static Value make_namespace(Dict attrs);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const {
    return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
  }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_markup() const { return kind_ == Kind::String && flag_; }
  SeqKind seq_kind() const { return seq_; }

  bool as_bool() const { return flag_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (flag_ ? 1 : 0) : int_; }
  double as_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(as_int()); }
  const Text& text() const { return *text_; }
  const std::string& str() const { return text_->bytes; }
  const List& items() const { return *list_; }
  const Dict& entries() const { return *dict_; }
  const Callable& function() const { return *callable_; }
  Dict& namespace_attrs() const { return *ns_; }
  // The name an undefined value was looked up by ("" when unknown).
  const std::string& undefined_name() const { return text_ ? text_->bytes : empty_name(); }

  bool truthy() const;
  // dict lookup by a key (Python equality); nullptr when absent.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Python's type name, for error messages.
  const char* type_name() const;
  bool is_shared_with(const Value& other) const;

 private:
  static const std::string& empty_name();
  Kind kind_ = Kind::Undefined;
  bool flag_ = false;  // Bool: the value; String: Markup
  SeqKind seq_ = SeqKind::List;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const Text> text_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<const Callable> callable_;
  std::shared_ptr<Dict> ns_;
};

bool values_equal(const Value& a, const Value& b);
// a < b as Python compares them; TypeError for unorderable types.
bool values_less(const Value& a, const Value& b);

// Python str(): strings as they are, other values as repr (True, None, {'a': 1}, [1, 2]).
// Undefined prints as "". The result carries the data ranges of the strings it contains.
Text py_str(const Value& v);
Text py_repr(const Value& v);
std::string py_float_repr(double d);

}  // namespace k25::jinja
