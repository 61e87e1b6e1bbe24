#include "tokenizer/jinja_operators.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "tokenizer/jinja_error.h"

namespace k25::jinja {

void undefined_error(const Value& v) {
  if (v.undefined_name().empty()) raise(ErrorKind::Undefined, "value is undefined");
  raise(ErrorKind::Undefined, "'", v.undefined_name(), "' is undefined");
}

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  raise(ErrorKind::Type, "unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '",
        b.type_name(), "'");
}

int64_t checked(__int128 v) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min()) {
    raise(ErrorKind::Limit, "integer result out of the 64-bit range");
  }
  return static_cast<int64_t>(v);
}

double py_fmod(double a, double b) {
  const double m = std::fmod(a, b);
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const bool real = a.kind() == Kind::Float || b.kind() == Kind::Float;
  if (op == "/") {
    if (b.as_double() == 0) raise(ErrorKind::Value, "division by zero");
    return Value::real(a.as_double() / b.as_double());
  }
  if (real) {
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (op == "**") return Value::real(std::pow(x, y));
    if (y == 0) raise(ErrorKind::Value, "float division by zero");
    if (op == "//") return Value::real(std::floor(x / y));
    return Value::real(py_fmod(x, y));
  }
  const int64_t x = a.as_int(), y = b.as_int();
  if (op == "+") return Value::integer(checked(static_cast<__int128>(x) + y));
  if (op == "-") return Value::integer(checked(static_cast<__int128>(x) - y));
  if (op == "*") return Value::integer(checked(static_cast<__int128>(x) * y));
  if (op == "**") {
    if (y < 0) return Value::real(std::pow(static_cast<double>(x), static_cast<double>(y)));
    __int128 r = 1;
    for (int64_t i = 0; i < y; ++i) {
      r *= x;
      checked(r);
      if (r == 0 || r == 1) break;
    }
    return Value::integer(checked(r));
  }
  if (y == 0) raise(ErrorKind::Value, "integer division or modulo by zero");
  if (x == std::numeric_limits<int64_t>::min() && y == -1) {
    raise(ErrorKind::Limit, "integer result out of the 64-bit range");
  }
  if (op == "//") return Value::integer(floor_div(x, y));
  const int64_t m = x % y;
  return Value::integer((m != 0 && ((m < 0) != (y < 0))) ? m + y : m);
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (static_cast<double>(seq.str().size()) * static_cast<double>(n) > (1 << 24)) {
      raise(ErrorKind::Limit, "string repetition result too large");
    }
    Text out;
    for (int64_t i = 0; i < n; ++i) out.append(seq.text());
    return Value::string(std::move(out));
  }
  if (static_cast<double>(seq.items().size()) * static_cast<double>(n) > (1 << 20)) {
    raise(ErrorKind::Limit, "list repetition result too large");
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.seq_kind());
}

bool is_plain_seq(const Value& v) {
  return v.is_list() && (v.seq_kind() == SeqKind::List || v.seq_kind() == SeqKind::Tuple);
}

Value add(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return arithmetic("+", a, b);
  if (a.is_string() && b.is_string()) {
    Text out;
    if (a.is_markup() != b.is_markup()) {
      // markupsafe: Markup + str escapes the plain side (even with autoescape off).
      out.append(a.is_markup() ? a.text() : html_escape(a.text()));
      out.append(b.is_markup() ? b.text() : html_escape(b.text()));
      return Value::string(std::move(out), true);
    }
    out.append(a.text());
    out.append(b.text());
    return Value::string(std::move(out), a.is_markup());
  }
  if (is_plain_seq(a) && is_plain_seq(b) && a.seq_kind() == b.seq_kind()) {
    List out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.seq_kind());
  }
  if (a.is_string()) {
    raise(ErrorKind::Type, "can only concatenate str (not \"", b.type_name(), "\") to str");
  }
  if (is_plain_seq(a)) {
    raise(ErrorKind::Type, "can only concatenate ", a.type_name(), " (not \"", b.type_name(),
          "\") to ", a.type_name());
  }
  unsupported("+", a, b);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!item.is_string()) {
        raise(ErrorKind::Type, "'in <string>' requires string as left operand, not ",
              item.type_name());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const Value& v : container.items()) {
        if (values_equal(v, item)) return true;
      }
      return false;
    case Kind::Dict:
    case Kind::Namespace:
      return container.find(item) != nullptr;
    default:
      raise(ErrorKind::Type, "argument of type '", container.type_name(), "' is not iterable");
  }
}

}  // namespace

Text html_escape(const Text& t) {
  Text out;
  size_t range = 0;
  const std::string& s = t.bytes;
  size_t run_start = 0;
  auto flush = [&](size_t end) {
    // Keep data ranges: a run of bytes keeps its origin.
    for (size_t p = run_start; p < end;) {
      while (range < t.data_ranges.size() && t.data_ranges[range].end <= p) ++range;
      const bool data = range < t.data_ranges.size() && t.data_ranges[range].begin <= p;
      size_t q = end;
      if (range < t.data_ranges.size()) {
        q = std::min(end, data ? t.data_ranges[range].end : t.data_ranges[range].begin);
      }
      out.append_derived(std::string_view(s).substr(p, q - p), data);
      p = q;
    }
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char* rep = nullptr;
    switch (s[i]) {
      case '&':
        rep = "&amp;";
        break;
      case '<':
        rep = "&lt;";
        break;
      case '>':
        rep = "&gt;";
        break;
      case '"':
        rep = "&#34;";
        break;
      case '\'':
        rep = "&#39;";
        break;
      default:
        continue;
    }
    flush(i);
    out.append(rep);
    run_start = i + 1;
  }
  flush(s.size());
  return out;
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::boolean(values_equal(a, b));
  if (op == "!=") return Value::boolean(!values_equal(a, b));
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "not in") return Value::boolean(!contains(b, a));
  if (op == "~") {
    Text out = py_str(a);
    out.append(py_str(b));
    return Value::string(std::move(out));
  }
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (op == "<") return Value::boolean(values_less(a, b));
  if (op == ">") return Value::boolean(values_less(b, a));
  if (op == "<=") return Value::boolean(values_equal(a, b) || values_less(a, b));
  if (op == ">=") return Value::boolean(values_equal(a, b) || values_less(b, a));
  if (op == "+") return add(a, b);
  if (op == "*") {
    if ((a.is_string() || is_plain_seq(a)) && (b.kind() == Kind::Int || b.kind() == Kind::Bool)) {
      return repeat(a, b.as_int());
    }
    if ((b.is_string() || is_plain_seq(b)) && (a.kind() == Kind::Int || a.kind() == Kind::Bool)) {
      return repeat(b, a.as_int());
    }
  }
  if (op == "%" && a.is_string()) return percent_format(a, b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) undefined_error(v);
  if (v.kind() == Kind::Float) return Value::real(-v.as_double());
  if (v.is_number()) return Value::integer(checked(-static_cast<__int128>(v.as_int())));
  raise(ErrorKind::Type, "bad operand type for unary -: '", v.type_name(), "'");
}

Value slice_value(const Value& obj, std::optional<int64_t> start, std::optional<int64_t> stop,
                  std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) raise(ErrorKind::Value, "slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = code_points(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else if (is_plain_seq(obj)) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    return Value::undefined();
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, st > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i : idx)
      out += from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1);
    Text t;
    t.append_derived(out, obj.text().has_data());
    return Value::string(std::move(t), obj.is_markup());
  }
  List out;
  for (int64_t i : idx) out.push_back(obj.items()[static_cast<size_t>(i)]);
  return Value::list(std::move(out), obj.seq_kind());
}

Value percent_format(const Value& fmt, const Value& args) {
  List values = is_plain_seq(args) && args.seq_kind() == SeqKind::Tuple ? args.items() : List{args};
  const std::string& f = fmt.str();
  Text out;
  bool data = fmt.text().has_data();
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out.append(std::string_view(&f[i], 1));
      continue;
    }
    if (++i >= f.size()) raise(ErrorKind::Value, "incomplete format");
    const char c = f[i];
    if (c == '%') {
      out.append("%");
      continue;
    }
    if (next >= values.size()) raise(ErrorKind::Type, "not enough arguments for format string");
    const Value& v = values[next++];
    switch (c) {
      case 's':
        out.append(py_str(v));
        break;
      case 'r':
        out.append(py_repr(v));
        break;
      case 'd':
      case 'i':
        if (!v.is_number())
          raise(ErrorKind::Type, "%d format: a real number is required, not ", v.type_name());
        out.append(std::to_string(v.kind() == Kind::Float ? static_cast<int64_t>(v.as_double())
                                                          : v.as_int()));
        break;
      case 'f': {
        if (!v.is_number()) raise(ErrorKind::Type, "must be real number, not ", v.type_name());
        char buf[64];
        std::snprintf(buf, sizeof buf, "%f", v.as_double());
        out.append(buf);
        break;
      }
      default:
        raise(ErrorKind::Value, "unsupported format character '", c, "'");
    }
  }
  if (next < values.size())
    raise(ErrorKind::Type, "not all arguments converted during string formatting");
  if (data && !out.has_data()) out = Text::from_data(out.bytes);
  return Value::string(std::move(out));
}

}  // namespace k25::jinja
