// Methods of str, dict and list that templates call (`s.strip()`, `d.get(k)`, `d.items()`).
// Mutating methods exist but raise SecurityError, as in Jinja2's immutable sandbox.
#include <string_view>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_operators.h"
#include "tokenizer/jinja_value.h"

namespace k25::jinja {

const Value* named_arg(CallArgs& args, std::string_view name) {
  for (const auto& [n, v] : args.named) {
    if (n == name) return &v;
  }
  return nullptr;
}

const Value* arg_at(CallArgs& args, size_t i, std::string_view name) {
  if (i < args.positional.size()) return &args.positional[i];
  return named_arg(args, name);
}

namespace {

const std::string* optional_string(CallArgs& args, size_t i, std::string_view name,
                                   const char* method) {
  const Value* v = arg_at(args, i, name);
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) raise(ErrorKind::Type, method, " arg must be None or str");
  return &v->str();
}

int64_t optional_int(CallArgs& args, size_t i, std::string_view name, int64_t dflt) {
  const Value* v = arg_at(args, i, name);
  if (!v || v->is_none()) return dflt;
  if (v->kind() != Kind::Int && v->kind() != Kind::Bool) {
    raise(ErrorKind::Type, "'", v->type_name(), "' object cannot be interpreted as an integer");
  }
  return v->as_int();
}

const Value& required(CallArgs& args, size_t i, std::string_view name, const char* method) {
  const Value* v = arg_at(args, i, name);
  if (!v) raise(ErrorKind::Type, method, "() takes at least ", i + 1, " argument(s)");
  return *v;
}

const std::string& required_string(CallArgs& args, size_t i, std::string_view name,
                                   const char* method) {
  const Value& v = required(args, i, name, method);
  if (!v.is_string())
    raise(ErrorKind::Type, method, "() argument must be str, not ", v.type_name());
  return v.str();
}

Value bound_method(const Value& self, const std::string& name,
                   Value (*fn)(const Value&, CallArgs&)) {
  return Value::callable(name, [self, fn](CallArgs& args) { return fn(self, args); });
}

Value unsafe(const Value& self, const std::string& name) {
  const std::string type = self.type_name();
  return Value::callable(name, [type, name](CallArgs&) -> Value {
    raise(ErrorKind::Security, "access to attribute '", name, "' of '", type,
          "' object is unsafe.");
  });
}

bool affix_match(const Value& self, CallArgs& args, bool prefix, const char* method) {
  const Value& a = required(args, 0, "prefix", method);
  List options = a.is_list() && a.seq_kind() == SeqKind::Tuple ? a.items() : List{a};
  const std::string& s = self.str();
  for (const Value& o : options) {
    if (!o.is_string()) {
      raise(ErrorKind::Type, method, " first arg must be str or a tuple of str, not ",
            o.type_name());
    }
    const std::string& x = o.str();
    if (x.size() > s.size()) continue;
    if (prefix ? s.compare(0, x.size(), x) == 0
               : s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return true;
    }
  }
  return false;
}

Value strip_method(const Value& self, CallArgs& args, StripSide side, const char* name) {
  const ByteRange r = py_strip(self.str(), optional_string(args, 0, "chars", name), side);
  return Value::string(self.text().substr(r.begin, r.end));
}

Value split_method(const Value& self, CallArgs& args) {
  const std::string* sep = optional_string(args, 0, "sep", "split");
  if (sep && sep->empty()) raise(ErrorKind::Value, "empty separator");
  List parts;
  for (const ByteRange& r : py_split(self.str(), sep, optional_int(args, 1, "maxsplit", -1))) {
    parts.push_back(Value::string(self.text().substr(r.begin, r.end)));
  }
  return Value::list(std::move(parts));
}

Value rsplit_method(const Value& self, CallArgs& args) {
  const std::string* sep = optional_string(args, 0, "sep", "rsplit");
  const int64_t maxsplit = optional_int(args, 1, "maxsplit", -1);
  if (!sep || maxsplit < 0) return split_method(self, args);
  if (sep->empty()) raise(ErrorKind::Value, "empty separator");
  const std::string& s = self.str();
  std::vector<ByteRange> ranges;
  size_t end = s.size();
  while (static_cast<int64_t>(ranges.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string::npos) break;
    ranges.push_back({at + sep->size(), end});
    end = at;
  }
  ranges.push_back({0, end});
  List parts;
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    parts.push_back(Value::string(self.text().substr(it->begin, it->end)));
  }
  return Value::list(std::move(parts));
}

Value derived(const Value& self, std::string s) {
  Text t;
  t.append_derived(s, self.text().has_data());
  return Value::string(std::move(t));
}

int64_t find_cp(const Value& self, CallArgs& args, bool reverse) {
  const std::string& sub = required_string(args, 0, "sub", "find");
  const std::string& s = self.str();
  const size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, at)));
}

// str.format: {} {0} {name} fields, {{ and }} escapes; conversions !s/!r; no format specs.
Value format_method(const Value& self, CallArgs& args) {
  const std::string& f = self.str();
  Text out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out.append("{");
      ++i;
    } else if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out.append("}");
      ++i;
    } else if (c == '{') {
      const size_t close = f.find('}', i);
      if (close == std::string::npos)
        raise(ErrorKind::Value, "Single '{' encountered in format string");
      std::string field = f.substr(i + 1, close - i - 1);
      char conversion = 's';
      if (const size_t bang = field.find('!'); bang != std::string::npos) {
        conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
        field.resize(bang);
      }
      if (const size_t colon = field.find(':'); colon != std::string::npos) {
        if (colon + 1 < field.size()) raise(ErrorKind::Value, "format specs are not supported");
        field.resize(colon);
      }
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        const size_t n = std::stoul(field.substr(0, 6));
        v = n < args.positional.size() ? &args.positional[n] : nullptr;
      } else {
        v = named_arg(args, field);
      }
      if (!v) raise(ErrorKind::Value, "Replacement index ", field, " out of range for format");
      out.append(conversion == 'r' ? py_repr(*v) : py_str(*v));
      i = close;
    } else if (c == '}') {
      raise(ErrorKind::Value, "Single '}' encountered in format string");
    } else {
      out.append(std::string_view(&f[i], 1));
    }
  }
  if (self.text().has_data() && !out.has_data()) out = Text::from_data(out.bytes);
  return Value::string(std::move(out));
}

Value string_method(const Value& self, const std::string& name) {
  using Fn = Value (*)(const Value&, CallArgs&);
  struct Entry {
    const char* name;
    Fn fn;
  };
  static const Entry kMethods[] = {
      {"startswith",
       [](const Value& s, CallArgs& a) {
         return Value::boolean(affix_match(s, a, true, "startswith"));
       }},
      {"endswith",
       [](const Value& s, CallArgs& a) {
         return Value::boolean(affix_match(s, a, false, "endswith"));
       }},
      {"strip",
       [](const Value& s, CallArgs& a) { return strip_method(s, a, StripSide::Both, "strip"); }},
      {"lstrip",
       [](const Value& s, CallArgs& a) { return strip_method(s, a, StripSide::Left, "lstrip"); }},
      {"rstrip",
       [](const Value& s, CallArgs& a) { return strip_method(s, a, StripSide::Right, "rstrip"); }},
      {"split", split_method},
      {"rsplit", rsplit_method},
      {"replace",
       [](const Value& s, CallArgs& a) {
         const std::string& from = required_string(a, 0, "old", "replace");
         const Value& to = required(a, 1, "new", "replace");
         if (!to.is_string())
           raise(ErrorKind::Type, "replace() argument 2 must be str, not ", to.type_name());
         return Value::string(
             py_replace(s.text(), from, to.text(), optional_int(a, 2, "count", -1)));
       }},
      {"upper", [](const Value& s, CallArgs&) { return derived(s, py_upper(s.str())); }},
      {"lower", [](const Value& s, CallArgs&) { return derived(s, py_lower(s.str())); }},
      {"title", [](const Value& s, CallArgs&) { return derived(s, py_title(s.str())); }},
      {"capitalize", [](const Value& s, CallArgs&) { return derived(s, py_capitalize(s.str())); }},
      {"find", [](const Value& s, CallArgs& a) { return Value::integer(find_cp(s, a, false)); }},
      {"rfind", [](const Value& s, CallArgs& a) { return Value::integer(find_cp(s, a, true)); }},
      {"index",
       [](const Value& s, CallArgs& a) {
         const int64_t i = find_cp(s, a, false);
         if (i < 0) raise(ErrorKind::Value, "substring not found");
         return Value::integer(i);
       }},
      {"count",
       [](const Value& s, CallArgs& a) {
         const std::string& sub = required_string(a, 0, "sub", "count");
         const std::string& str = s.str();
         if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(str)) + 1);
         int64_t n = 0;
         for (size_t at = str.find(sub); at != std::string::npos;
              at = str.find(sub, at + sub.size()))
           ++n;
         return Value::integer(n);
       }},
      {"join",
       [](const Value& s, CallArgs& a) {
         const Value& items = required(a, 0, "iterable", "join");
         if (!items.is_list()) raise(ErrorKind::Type, "can only join an iterable");
         Text out;
         bool first = true;
         for (const Value& v : items.items()) {
           if (!v.is_string())
             raise(ErrorKind::Type, "sequence item: expected str instance, ", v.type_name(),
                   " found");
           if (!first) out.append(s.text());
           first = false;
           out.append(v.text());
         }
         return Value::string(std::move(out));
       }},
      {"format", format_method},
      {"isdigit",
       [](const Value& s, CallArgs&) {
         const std::string& x = s.str();
         return Value::boolean(!x.empty() &&
                               x.find_first_not_of("0123456789") == std::string::npos);
       }},
      {"isspace",
       [](const Value& s, CallArgs&) {
         const std::vector<uint32_t> cps = code_points(s.str());
         bool all = !cps.empty();
         for (uint32_t c : cps) all &= is_python_space(c);
         return Value::boolean(all);
       }},
      {"isalpha",
       [](const Value& s, CallArgs&) {
         const std::string& x = s.str();
         bool all = !x.empty();
         for (char c : x) all &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c & 0x80);
         return Value::boolean(all);
       }},
      {"islower",
       [](const Value& s, CallArgs&) {
         return Value::boolean(py_lower(s.str()) == s.str() && py_upper(s.str()) != s.str());
       }},
      {"isupper",
       [](const Value& s, CallArgs&) {
         return Value::boolean(py_upper(s.str()) == s.str() && py_lower(s.str()) != s.str());
       }},
      {"splitlines",
       [](const Value& s, CallArgs&) {
         List out;
         for (const ByteRange& r : py_splitlines(s.str()))
           out.push_back(Value::string(s.text().substr(r.begin, r.end)));
         return Value::list(std::move(out));
       }},
  };
  for (const Entry& e : kMethods) {
    if (name == e.name) return bound_method(self, name, e.fn);
  }
  return Value::undefined(name);
}

Value dict_view(const Value& d, int which) {
  List out;
  for (const auto& [k, v] : d.entries()) {
    if (which == 0) out.push_back(k);
    if (which == 1) out.push_back(v);
    if (which == 2) out.push_back(Value::list({k, v}, SeqKind::Tuple));
  }
  return Value::list(std::move(out), SeqKind::View);
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "items")
    return bound_method(self, name, [](const Value& d, CallArgs&) { return dict_view(d, 2); });
  if (name == "keys")
    return bound_method(self, name, [](const Value& d, CallArgs&) { return dict_view(d, 0); });
  if (name == "values")
    return bound_method(self, name, [](const Value& d, CallArgs&) { return dict_view(d, 1); });
  if (name == "copy")
    return bound_method(self, name,
                        [](const Value& d, CallArgs&) { return Value::dict(d.entries()); });
  if (name == "get") {
    return bound_method(self, name, [](const Value& d, CallArgs& a) {
      const Value& key = required(a, 0, "key", "get");
      const Value* v = d.find(key);
      if (v) return *v;
      const Value* dflt = arg_at(a, 1, "default");
      return dflt ? *dflt : Value::none();
    });
  }
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "clear") {
    return unsafe(self, name);
  }
  return Value::undefined(name);
}

Value list_method(const Value& self, const std::string& name) {
  if (name == "index") {
    return bound_method(self, name, [](const Value& l, CallArgs& a) {
      const Value& x = required(a, 0, "value", "index");
      for (size_t i = 0; i < l.items().size(); ++i) {
        if (values_equal(l.items()[i], x)) return Value::integer(static_cast<int64_t>(i));
      }
      raise(ErrorKind::Value, "value is not in list");
    });
  }
  if (name == "count") {
    return bound_method(self, name, [](const Value& l, CallArgs& a) {
      const Value& x = required(a, 0, "value", "count");
      int64_t n = 0;
      for (const Value& v : l.items()) n += values_equal(v, x);
      return Value::integer(n);
    });
  }
  if (name == "copy" && self.seq_kind() == SeqKind::List) {
    return bound_method(self, name,
                        [](const Value& l, CallArgs&) { return Value::list(l.items()); });
  }
  if (self.seq_kind() == SeqKind::List &&
      (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
       name == "remove" || name == "reverse" || name == "sort" || name == "clear")) {
    return unsafe(self, name);
  }
  return Value::undefined(name);
}

}  // namespace

Value method_of(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::String:
      return string_method(obj, name);
    case Kind::Dict:
      return dict_method(obj, name);
    case Kind::List:
      if (obj.seq_kind() == SeqKind::List || obj.seq_kind() == SeqKind::Tuple)
        return list_method(obj, name);
      return Value::undefined(name);
    default:
      return Value::undefined(name);
  }
}

}  // namespace k25::jinja
