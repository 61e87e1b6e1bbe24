// Jinja2's filters as chat templates use them, with transformers' tojson (json.dumps) in place
// of Jinja's own. Filters that return generators in Jinja2 (map, select, items, ...) return
// generator values, so that e.g. `| tojson` of them fails as it does in Python.
#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_operators.h"

namespace k25::jinja {

namespace {

bool flag_arg(CallArgs& a, size_t i, std::string_view name, bool dflt) {
  const Value* v = arg_at(a, i, name);
  return v ? v->truthy() : dflt;
}

Value str_or_undefined_error(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  return v;
}

// Jinja's attribute getter for map/selectattr/sort: "a.b.0" looks up each part as an item.
Value attribute_path(Interpreter& in, const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = in.get_item(v,
                    digits ? Value::integer(std::stoll(part.substr(0, 18))) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

std::string attribute_name(CallArgs& a, size_t i, const char* filter) {
  const Value* v = arg_at(a, i, "attribute");
  if (!v) raise(ErrorKind::Type, filter, " needs an attribute");
  return py_str(*v).bytes;
}

Value generator(List items) {
  return Value::list(std::move(items), SeqKind::Generator);
}

// The test of select/reject/selectattr/rejectattr: named test with the remaining arguments.
bool apply_test(Interpreter& in, const Value& v, CallArgs& a, size_t first) {
  if (a.positional.size() <= first) return v.truthy();
  const std::string name = py_str(a.positional[first]).bytes;
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1,
                         a.positional.end());
  rest.named = a.named;
  return in.run_test(name, v, rest);
}

Value select_filter(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  List out;
  std::string attr;
  if (by_attr) attr = attribute_name(a, 0, "selectattr");
  for (const Value& item : in.iterate(v)) {
    const Value subject = by_attr ? attribute_path(in, item, attr) : item;
    if (apply_test(in, subject, a, by_attr ? 1 : 0) == keep) out.push_back(item);
  }
  return generator(std::move(out));
}

Value map_filter(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  const List items = in.iterate(v);
  if (a.positional.empty()) {
    const Value* attr = named_arg(a, "attribute");
    if (!attr) return generator(items);
    const Value* dflt = named_arg(a, "default");
    const std::string path = py_str(*attr).bytes;
    for (const Value& item : items) {
      Value r = attribute_path(in, item, path);
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return generator(std::move(out));
  }
  const std::string name = py_str(a.positional[0]).bytes;
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.named = a.named;
  for (const Value& item : items) {
    CallArgs copy = rest;
    out.push_back(in.run_filter(name, item, copy));
  }
  return generator(std::move(out));
}

// The key sort/unique/min/max/dictsort compare: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.str()));
  return v;
}

Value sort_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const bool reverse = flag_arg(a, 0, "reverse", false);
  const bool case_sensitive = flag_arg(a, 1, "case_sensitive", false);
  const Value* attr = arg_at(a, 2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : in.iterate(v)) {
    Value key = attr ? attribute_path(in, item, py_str(*attr).bytes) : item;
    keyed.emplace_back(sort_key(key, case_sensitive), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? values_less(y.first, x.first) : values_less(x.first, y.first);
  });
  List out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value dictsort_filter(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_dict()) raise(ErrorKind::Type, "dictsort needs a mapping");
  const bool case_sensitive = flag_arg(a, 0, "case_sensitive", false);
  const Value* by = arg_at(a, 1, "by");
  const bool by_value = by && by->is_string() && by->str() == "value";
  if (by && !(by->is_string() && (by->str() == "key" || by->str() == "value"))) {
    raise(ErrorKind::Value, "You can only sort by either \"key\" or \"value\"");
  }
  const bool reverse = flag_arg(a, 2, "reverse", false);
  Dict entries = v.entries();
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(by_value ? x.second : x.first, case_sensitive);
    const Value ky = sort_key(by_value ? y.second : y.first, case_sensitive);
    return reverse ? values_less(ky, kx) : values_less(kx, ky);
  });
  List out;
  for (auto& [k, val] : entries) out.push_back(Value::list({k, val}, SeqKind::Tuple));
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  const bool case_sensitive = flag_arg(a, 0, "case_sensitive", false);
  const Value* attr = arg_at(a, 1, "attribute");
  const List items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = sort_key(attr ? attribute_path(in, items[i], py_str(*attr).bytes) : items[i],
                         case_sensitive);
    if (i == 0 || (want_max ? values_less(best_key, key) : values_less(key, best_key))) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value unique_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const bool case_sensitive = flag_arg(a, 0, "case_sensitive", false);
  const Value* attr = arg_at(a, 1, "attribute");
  List out, seen;
  for (const Value& item : in.iterate(v)) {
    Value key =
        sort_key(attr ? attribute_path(in, item, py_str(*attr).bytes) : item, case_sensitive);
    bool dup = false;
    for (const Value& s : seen) dup |= values_equal(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return generator(std::move(out));
}

Value length_filter(Interpreter&, const Value& v, CallArgs&) {
  switch (v.kind()) {
    case Kind::Undefined:
      return Value::integer(0);
    case Kind::String:
      return Value::integer(static_cast<int64_t>(code_point_count(v.str())));
    case Kind::List:
      if (v.seq_kind() != SeqKind::Generator)
        return Value::integer(static_cast<int64_t>(v.items().size()));
      break;
    case Kind::Dict:
      return Value::integer(static_cast<int64_t>(v.entries().size()));
    default:
      break;
  }
  raise(ErrorKind::Type, "object of type '", v.type_name(), "' has no len()");
}

Value tojson_filter(Interpreter&, const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = flag_arg(a, 0, "ensure_ascii", false);
  if (const Value* indent = arg_at(a, 1, "indent"); indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->str();
    } else if (indent->kind() == Kind::Int || indent->kind() == Kind::Bool) {
      o.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    } else {
      raise(ErrorKind::Type, "indent must be an int or a string");
    }
    o.item_separator = ",";
  }
  if (const Value* sep = arg_at(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2 || !sep->items()[0].is_string() ||
        !sep->items()[1].is_string()) {
      raise(ErrorKind::Type, "separators must be a pair of strings");
    }
    o.item_separator = sep->items()[0].str();
    o.key_separator = sep->items()[1].str();
  }
  o.sort_keys = flag_arg(a, 3, "sort_keys", false);
  return Value::string(json_dumps(v, o));
}

Value indent_filter(Interpreter&, const Value& v, CallArgs& a) {
  str_or_undefined_error(v);
  if (!v.is_string()) raise(ErrorKind::Type, "can only indent a string, not ", v.type_name());
  std::string indention = "    ";
  if (const Value* w = arg_at(a, 0, "width")) {
    indention =
        w->is_string()
            ? w->str()
            : std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1 << 16)), ' ');
  }
  const bool first = flag_arg(a, 1, "first", false);
  const bool blank = flag_arg(a, 2, "blank", false);
  Text s = v.text();
  s.append("\n");
  const std::vector<ByteRange> lines = py_splitlines(s.bytes);
  Text out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out.append("\n");
      if (blank || lines[i].end > lines[i].begin) out.append(indention);
    }
    out.append(s.substr(lines[i].begin, lines[i].end));
  }
  if (first) {
    Text prefixed(indention);
    prefixed.append(out);
    out = std::move(prefixed);
  }
  return Value::string(std::move(out), v.is_markup());
}

Value join_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* sep = arg_at(a, 0, "d");
  const Value* attr = arg_at(a, 1, "attribute");
  Text out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first && sep) out.append(py_str(*sep));
    first = false;
    out.append(py_str(attr ? attribute_path(in, item, py_str(*attr).bytes) : item));
  }
  return Value::string(std::move(out));
}

Value int_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = arg_at(a, 0, "default");
  const Value fallback = dflt ? *dflt : Value::integer(0);
  if (v.is_undefined()) undefined_error(v);
  if (v.kind() == Kind::Float) {
    if (!std::isfinite(v.as_double())) return fallback;
    return Value::integer(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_number()) return Value::integer(v.as_int());
  if (!v.is_string()) return fallback;
  const ByteRange r = py_strip(v.str(), nullptr, StripSide::Both);
  std::string s = v.str().substr(r.begin, r.end - r.begin);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) return Value::integer(i);
  const double d = std::strtod(s.c_str(), &end);
  if (*end == '\0' && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
  return fallback;
}

Value float_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = arg_at(a, 0, "default");
  const Value fallback = dflt ? *dflt : Value::real(0.0);
  if (v.is_undefined()) undefined_error(v);
  if (v.is_number()) return Value::real(v.as_double());
  if (!v.is_string()) return fallback;
  const ByteRange r = py_strip(v.str(), nullptr, StripSide::Both);
  const std::string s = v.str().substr(r.begin, r.end - r.begin);
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') return fallback;
  return Value::real(d);
}

Value round_filter(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_number()) raise(ErrorKind::Type, "round needs a number, not ", v.type_name());
  const Value* p = arg_at(a, 0, "precision");
  const int64_t precision = p ? p->as_int() : 0;
  const Value* m = arg_at(a, 1, "method");
  const std::string method = m ? py_str(*m).bytes : "common";
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // Python's round(): ties to even
  } else if (method == "floor") {
    r = std::floor(x);
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else {
    raise(ErrorKind::Type, "method must be common, ceil or floor");
  }
  if (v.kind() != Kind::Float && method == "common" && precision >= 0)
    return Value::integer(v.as_int());
  return Value::real(r / scale);
}

Value text_map(const Value& v, std::string (*fn)(std::string_view)) {
  const Text s = py_str(v);
  Text out;
  out.append_derived(fn(s.bytes), s.has_data());
  return Value::string(std::move(out), v.is_markup());
}

Value trim_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Text s = py_str(v);
  const Value* chars = arg_at(a, 0, "chars");
  const std::string* c = chars && chars->is_string() ? &chars->str() : nullptr;
  const ByteRange r = py_strip(s.bytes, c, StripSide::Both);
  return Value::string(s.substr(r.begin, r.end), v.is_markup());
}

Value replace_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Value* from = arg_at(a, 0, "old");
  const Value* to = arg_at(a, 1, "new");
  if (!from || !to) raise(ErrorKind::Type, "replace needs old and new strings");
  const Value* count = arg_at(a, 2, "count");
  const int64_t n = count && !count->is_none() ? count->as_int() : -1;
  return Value::string(py_replace(py_str(v), py_str(*from).bytes, py_str(*to), n));
}

Value default_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Value* dflt = arg_at(a, 0, "default_value");
  const bool boolean = flag_arg(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.truthy())) return dflt ? *dflt : Value::string("");
  return v;
}

Value items_filter(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) raise(ErrorKind::Type, "Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, val] : v.entries()) out.push_back(Value::list({k, val}, SeqKind::Tuple));
  return generator(std::move(out));
}

Value sum_filter(Interpreter& in, const Value& v, CallArgs& a) {
  const Value* attr = arg_at(a, 0, "attribute");
  const Value* start = arg_at(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const Value& item : in.iterate(v)) {
    total = binary_op("+", total, attr ? attribute_path(in, item, py_str(*attr).bytes) : item);
  }
  return total;
}

Value reverse_filter(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::vector<uint32_t> cps = code_points(v.str());
    std::reverse(cps.begin(), cps.end());
    Text t;
    t.append_derived(from_code_points(cps, 0, cps.size()), v.text().has_data());
    return Value::string(std::move(t));
  }
  List items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return generator(std::move(items));
}

Value center_filter(Interpreter&, const Value& v, CallArgs& a) {
  const Value* w = arg_at(a, 0, "width");
  const int64_t width = std::min<int64_t>(w ? w->as_int() : 80, 1 << 16);
  const Text s = py_str(v);
  const int64_t n = static_cast<int64_t>(code_point_count(s.bytes));
  if (width <= n) return Value::string(s);
  const int64_t total = width - n;
  // CPython: left = total / 2 + (total & width & 1)
  const int64_t left = total / 2 + (total & width & 1);
  Text out(std::string(static_cast<size_t>(left), ' '));
  out.append(s);
  out.append(std::string(static_cast<size_t>(total - left), ' '));
  return Value::string(std::move(out));
}

using Table = std::unordered_map<std::string_view, FilterFn>;

const Table& filters() {
  static const Table t = {
      {"tojson", tojson_filter},
      {"length", length_filter},
      {"count", length_filter},
      {"trim", trim_filter},
      {"string", [](Interpreter&, const Value& v,
                    CallArgs&) { return v.is_string() ? v : Value::string(py_str(v)); }},
      {"default", default_filter},
      {"d", default_filter},
      {"join", join_filter},
      {"items", items_filter},
      {"list",
       [](Interpreter& in, const Value& v, CallArgs&) { return Value::list(in.iterate(v)); }},
      {"safe",
       [](Interpreter&, const Value& v, CallArgs&) { return Value::string(py_str(v), true); }},
      {"escape",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_markup() ? v : Value::string(html_escape(py_str(v)), true);
       }},
      {"e",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_markup() ? v : Value::string(html_escape(py_str(v)), true);
       }},
      {"forceescape", [](Interpreter&, const Value& v,
                         CallArgs&) { return Value::string(html_escape(py_str(v)), true); }},
      {"select", [](Interpreter& in, const Value& v,
                    CallArgs& a) { return select_filter(in, v, a, false, true); }},
      {"reject", [](Interpreter& in, const Value& v,
                    CallArgs& a) { return select_filter(in, v, a, false, false); }},
      {"selectattr", [](Interpreter& in, const Value& v,
                        CallArgs& a) { return select_filter(in, v, a, true, true); }},
      {"rejectattr", [](Interpreter& in, const Value& v,
                        CallArgs& a) { return select_filter(in, v, a, true, false); }},
      {"map", map_filter},
      {"lower", [](Interpreter&, const Value& v, CallArgs&) { return text_map(v, py_lower); }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&) { return text_map(v, py_upper); }},
      {"title", [](Interpreter&, const Value& v, CallArgs&) { return text_map(v, py_title); }},
      {"capitalize",
       [](Interpreter&, const Value& v, CallArgs&) { return text_map(v, py_capitalize); }},
      {"replace", replace_filter},
      {"indent", indent_filter},
      {"int", int_filter},
      {"float", float_filter},
      {"round", round_filter},
      {"abs",
       [](Interpreter&, const Value& v, CallArgs&) {
         if (v.kind() == Kind::Float) return Value::real(std::fabs(v.as_double()));
         if (v.is_number()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
         raise(ErrorKind::Type, "bad operand type for abs(): '", v.type_name(), "'");
       }},
      {"min",
       [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }},
      {"max", [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }},
      {"sort", sort_filter},
      {"unique", unique_filter},
      {"dictsort", dictsort_filter},
      {"first",
       [](Interpreter& in, const Value& v, CallArgs&) {
         const List items = in.iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.")
                              : items.front();
       }},
      {"last",
       [](Interpreter& in, const Value& v, CallArgs&) {
         if (v.is_list() && v.seq_kind() == SeqKind::Generator) {
           raise(ErrorKind::Type, "'generator' object is not reversible");
         }
         const List items = in.iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.")
                              : items.back();
       }},
      {"sum", sum_filter},
      {"reverse", reverse_filter},
      {"center", center_filter},
      {"attr",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value* name = arg_at(a, 0, "name");
         if (!name) raise(ErrorKind::Type, "attr needs a name");
         if (v.is_undefined()) undefined_error(v);
         if (v.kind() == Kind::Namespace) {
           const Value* x = v.find(std::string_view(py_str(*name).bytes));
           return x ? *x : Value::undefined(py_str(*name).bytes);
         }
         return method_of(v, py_str(*name).bytes);
       }},
      {"format",
       [](Interpreter&, const Value& v, CallArgs& a) {
         return percent_format(Value::string(py_str(v)), Value::list(a.positional, SeqKind::Tuple));
       }},
  };
  return t;
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  const auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}

}  // namespace k25::jinja
