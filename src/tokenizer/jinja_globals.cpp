#include "tokenizer/jinja_globals.h"

#include <cstring>
#include <ctime>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"

namespace k25::jinja {

namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja2's sandbox refuses larger ranges

Value range_fn(CallArgs& args) {
  std::vector<int64_t> a;
  for (const Value& v : args.positional) {
    if (v.kind() != Kind::Int && v.kind() != Kind::Bool) {
      raise(ErrorKind::Type, "'", v.type_name(), "' object cannot be interpreted as an integer");
    }
    a.push_back(v.as_int());
  }
  if (a.empty() || a.size() > 3) raise(ErrorKind::Type, "range expected 1 to 3 arguments");
  const int64_t start = a.size() == 1 ? 0 : a[0];
  const int64_t stop = a.size() == 1 ? a[0] : a[1];
  const int64_t step = a.size() == 3 ? a[2] : 1;
  if (step == 0) raise(ErrorKind::Value, "range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 n =
      span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
  if (n > kMaxRange) {
    raise(ErrorKind::Value, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
          kMaxRange, ").");
  }
  List out;
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    out.push_back(Value::integer(start + i * step));
  return Value::list(std::move(out));
}

Value namespace_fn(CallArgs& args) {
  Dict attrs;
  auto put = [&](const Value& k, const Value& v) {
    for (auto& [ek, ev] : attrs) {
      if (values_equal(ek, k)) {
        ev = v;
        return;
      }
    }
    attrs.emplace_back(k, v);
  };
  for (const Value& p : args.positional) {
    if (!p.is_dict()) raise(ErrorKind::Type, "namespace() takes a mapping as positional argument");
    for (const auto& [k, v] : p.entries()) put(k, v);
  }
  for (const auto& [k, v] : args.named) put(Value::string(k), v);
  return Value::make_namespace(std::move(attrs));
}

Value dict_fn(CallArgs& args) {
  Dict out;
  for (const Value& p : args.positional) {
    if (!p.is_dict()) raise(ErrorKind::Type, "dict() takes a mapping as positional argument");
    out = p.entries();
  }
  for (const auto& [k, v] : args.named) out.emplace_back(Value::string(k), v);
  return Value::dict(std::move(out));
}

}  // namespace

std::string strftime_c(const std::string& format, const std::tm& tm) {
  if (format.empty()) return "";
  // glibc's strftime in the process's C locale is what CPython calls on Linux.
  std::string buf(format.size() * 32 + 64, '\0');
  buf.resize(std::strftime(buf.data(), buf.size(), format.c_str(), &tm));
  return buf;
}

Variables make_globals(Interpreter& interp) {
  Variables g;
  g.emplace_back("range", Value::callable("range", range_fn));
  g.emplace_back("namespace", Value::callable("namespace", namespace_fn));
  g.emplace_back("dict", Value::callable("dict", dict_fn));
  g.emplace_back("raise_exception", Value::callable("raise_exception", [](CallArgs& args) -> Value {
                   const Value* msg = arg_at(args, 0, "message");
                   throw TemplateError(ErrorKind::Raised, msg ? py_str(*msg).bytes : std::string());
                 }));
  g.emplace_back("strftime_now", Value::callable("strftime_now", [&interp](CallArgs& args) {
                   const Value* fmt = arg_at(args, 0, "format");
                   if (!fmt || !fmt->is_string())
                     raise(ErrorKind::Type, "strftime_now() takes a format string");
                   return Value::string(strftime_c(fmt->str(), interp.now()));
                 }));
  return g;
}

}  // namespace k25::jinja
