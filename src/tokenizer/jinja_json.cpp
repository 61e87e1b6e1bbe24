#include "tokenizer/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_error.h"
#include "tokenizer/unicode.h"

namespace k25::jinja {

namespace {

void append_hex4(std::string& out, uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", u & 0xFFFF);
  out += buf;
}

void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(s, pos);
    const uint32_t c = step.codepoint;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const uint32_t v = c - 0x10000;
            append_hex4(out, 0xD800 + (v >> 10));
            append_hex4(out, 0xDC00 + (v & 0x3FF));
          } else {
            append_hex4(out, c);
          }
        } else if (step.valid) {
          out.append(s, pos, step.length);
        } else {
          unicode::append_utf8(out, c);
        }
    }
    pos += step.length;
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {}
  Text finish() {
    Text t;
    t.append_derived(out_, has_data_);
    return t;
  }

  void dump(const Value& v, int level) {
    if (level > 200) raise(ErrorKind::Limit, "maximum recursion depth exceeded in tojson");
    switch (v.kind()) {
      case Kind::None:
        out_ += "null";
        return;
      case Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out_ += std::to_string(v.as_int());
        return;
      case Kind::Float:
        out_ += float_json(v.as_double());
        return;
      case Kind::String:
        has_data_ |= v.text().has_data();
        append_json_string(out_, v.str(), o_.ensure_ascii);
        return;
      case Kind::List:
        if (v.seq_kind() == SeqKind::List || v.seq_kind() == SeqKind::Tuple) {
          dump_list(v.items(), level);
          return;
        }
        break;
      case Kind::Dict:
        dump_dict(v.entries(), level);
        return;
      default:
        break;
    }
    raise(ErrorKind::Type, "Object of type ", v.type_name(), " is not JSON serializable");
  }

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *o_.indent;
  }

  void dump_list(const List& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += o_.item_separator;
      newline(level + 1);
      dump(items[i], level + 1);
    }
    newline(level);
    out_ += ']';
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        has_data_ |= k.text().has_data();
        return k.str();
      case Kind::Int:
        return std::to_string(k.as_int());
      case Kind::Float:
        return float_json(k.as_double());
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::None:
        return "null";
      default:
        raise(ErrorKind::Type, "keys must be str, int, float, bool or None, not ", k.type_name());
    }
  }

  void dump_dict(const Dict& entries, int level) {
    if (entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> order;
    for (const auto& e : entries) order.push_back(&e);
    if (o_.sort_keys) {
      std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        return values_less(a->first, b->first);
      });
    }
    out_ += '{';
    bool first = true;
    for (const auto* e : order) {
      if (!first) out_ += o_.item_separator;
      first = false;
      newline(level + 1);
      append_json_string(out_, key_text(e->first), o_.ensure_ascii);
      out_ += o_.key_separator;
      dump(e->second, level + 1);
    }
    newline(level);
    out_ += '}';
  }

  const JsonDumpOptions& o_;
  std::string out_;
  bool has_data_ = false;
};

}  // namespace

Text json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper d(options);
  d.dump(v, 0);
  return d.finish();
}

Value value_from_json(const nlohmann::ordered_json& j, bool as_data) {
  auto text = [&](std::string s) {
    return as_data ? Text::from_data(std::move(s)) : Text(std::move(s));
  };
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::real(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(text(j.get<std::string>()));
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(value_from_json(e, as_data));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict entries;
      entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        entries.emplace_back(Value::string(text(k)), value_from_json(e, as_data));
      }
      return Value::dict(std::move(entries));
    }
    default:
      return Value::none();
  }
}

}  // namespace k25::jinja
