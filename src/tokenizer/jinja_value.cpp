#include "tokenizer/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_error.h"
#include "tokenizer/unicode.h"

namespace k25::jinja {

const std::string& Value::empty_name() {
  static const std::string empty;
  return empty;
}

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.text_ = std::make_shared<const Text>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.flag_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.int_ = i;
  return v;
}

Value Value::real(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.float_ = d;
  return v;
}

Value Value::string(Text t, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.flag_ = markup;
  v.text_ = std::make_shared<const Text>(std::move(t));
  return v;
}

Value Value::list(List items, SeqKind kind) {
  Value v;
  v.kind_ = Kind::List;
  v.seq_ = kind;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict entries) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<const Dict>(std::move(entries));
  return v;
}

Value Value::callable(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.ns_ = std::make_shared<Dict>(std::move(attrs));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return flag_;
    case Kind::Int:
      return int_ != 0;
    case Kind::Float:
      return float_ != 0;
    case Kind::String:
      return !text_->bytes.empty();
    case Kind::List:
      return seq_ == SeqKind::Generator || !list_->empty();
    case Kind::Dict:
      return !dict_->empty();
    case Kind::Callable:
    case Kind::Namespace:
      return true;
  }
  return false;
}

const Value* Value::find(const Value& key) const {
  const Dict* d = kind_ == Kind::Dict        ? dict_.get()
                  : kind_ == Kind::Namespace ? ns_.get()
                                             : nullptr;
  if (!d) return nullptr;
  for (const auto& [k, v] : *d) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  const Dict* d = kind_ == Kind::Dict        ? dict_.get()
                  : kind_ == Kind::Namespace ? ns_.get()
                                             : nullptr;
  if (!d) return nullptr;
  for (const auto& [k, v] : *d) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return flag_ ? "Markup" : "str";
    case Kind::List:
      switch (seq_) {
        case SeqKind::Tuple:
          return "tuple";
        case SeqKind::Generator:
          return "generator";
        case SeqKind::View:
          return "dict_items";
        default:
          return "list";
      }
    case Kind::Dict:
      return "dict";
    case Kind::Callable:
      return "function";
    case Kind::Namespace:
      return "Namespace";
  }
  return "object";
}

bool Value::is_shared_with(const Value& other) const {
  return (ns_ && ns_ == other.ns_) || (list_ && list_ == other.list_) ||
         (dict_ && dict_ == other.dict_);
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      if (a.seq_kind() == SeqKind::Generator || b.seq_kind() == SeqKind::Generator ||
          a.seq_kind() == SeqKind::View || b.seq_kind() == SeqKind::View) {
        return a.is_shared_with(b);
      }
      if ((a.seq_kind() == SeqKind::Tuple) != (b.seq_kind() == SeqKind::Tuple)) return false;
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* other = b.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Kind::Callable:
      return &a.function() == &b.function();
    case Kind::Namespace:
      return a.is_shared_with(b);
    default:
      return false;
  }
}

bool values_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
      a.seq_kind() != SeqKind::Generator) {
    const List& x = a.items();
    const List& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return values_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  raise(ErrorKind::Type, "'<' not supported between instances of '", a.type_name(), "' and '",
        b.type_name(), "'");
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, 1) + (e > 2 ? s.substr(2, e - 2) : "");
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mantissa + ebuf;
}

namespace {

// str.isprintable() for the code points that can appear in real text: controls, format
// characters, separators other than the space, and private use are not printable.
bool is_printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || c == 0x61C || c == 0x180E) {
    return false;
  }
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB) || c >= 0xF0000) return false;
  if (c >= 0xE0000 && c <= 0xE007F) return false;
  return true;
}

void append_string_repr(Text& out, const Value& v) {
  const std::string& s = v.str();
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string r(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    const uint32_t c = step.codepoint;
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c == '\n') {
      r += "\\n";
    } else if (c == '\r') {
      r += "\\r";
    } else if (c == '\t') {
      r += "\\t";
    } else if (!is_printable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", c);
      }
      r += buf;
    } else {
      r.append(s, pos, step.length);
    }
    pos += step.length;
  }
  r += quote;
  out.append_derived(r, v.text().has_data());
}

void append_repr(Text& out, const Value& v, int depth);

void append_dict_repr(Text& out, const Dict& d, int depth) {
  out.append("{");
  bool first = true;
  for (const auto& [k, val] : d) {
    if (!first) out.append(", ");
    first = false;
    append_repr(out, k, depth + 1);
    out.append(": ");
    append_repr(out, val, depth + 1);
  }
  out.append("}");
}

void append_repr(Text& out, const Value& v, int depth) {
  if (depth > 200) raise(ErrorKind::Limit, "maximum recursion depth exceeded while printing");
  switch (v.kind()) {
    case Kind::Undefined:
      out.append("Undefined");
      return;
    case Kind::None:
      out.append("None");
      return;
    case Kind::Bool:
      out.append(v.as_bool() ? "True" : "False");
      return;
    case Kind::Int:
      out.append(std::to_string(v.as_int()));
      return;
    case Kind::Float:
      out.append(py_float_repr(v.as_double()));
      return;
    case Kind::String:
      if (v.is_markup()) out.append("Markup(");
      append_string_repr(out, v);
      if (v.is_markup()) out.append(")");
      return;
    case Kind::List: {
      if (v.seq_kind() == SeqKind::Generator) {
        out.append("<generator object>");
        return;
      }
      const bool tuple = v.seq_kind() == SeqKind::Tuple;
      if (v.seq_kind() == SeqKind::View) out.append("dict_items(");
      out.append(tuple ? "(" : "[");
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out.append(", ");
        append_repr(out, v.items()[i], depth + 1);
      }
      if (tuple && v.items().size() == 1) out.append(",");
      out.append(tuple ? ")" : "]");
      if (v.seq_kind() == SeqKind::View) out.append(")");
      return;
    }
    case Kind::Dict:
      append_dict_repr(out, v.entries(), depth);
      return;
    case Kind::Callable:
      out.append("<function " + v.function().name + ">");
      return;
    case Kind::Namespace:
      out.append("<Namespace ");
      append_dict_repr(out, v.namespace_attrs(), depth);
      out.append(">");
      return;
  }
}

}  // namespace

Text py_repr(const Value& v) {
  Text out;
  append_repr(out, v, 0);
  return out;
}

Text py_str(const Value& v) {
  if (v.is_string()) return v.text();
  if (v.is_undefined()) return Text();
  return py_repr(v);
}

}  // namespace k25::jinja
