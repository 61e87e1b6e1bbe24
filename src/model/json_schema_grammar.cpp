#include "model/json_schema_grammar.h"

#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace k25 {

using nlohmann::ordered_json;

namespace {

// Keywords that describe a schema without constraining values.
const std::set<std::string>& annotations() {
  static const std::set<std::string> names = {
      "title",    "description", "default",   "examples",   "$schema", "$id",
      "$comment", "readOnly",    "writeOnly", "deprecated", "$defs",   "definitions",
      "strict",  // some clients repeat OpenAI's flag inside the schema
  };
  return names;
}

// Digit counts are bounded so that an untrained model cannot run on forever inside a number.
constexpr const char* kPrimitives[][2] = {
    {"ws", "( \" \" | \"\\n\" [ \\t]{0,20} )?"},
    {"char",
     "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] HEX HEX HEX | "
     "[dD] [0-7] HEX HEX ) )"},
    {"hex", "[0-9a-fA-F]"},
    {"string", "\"\\\"\" CHAR* \"\\\"\""},
    {"int", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"},
    {"number", "INT ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?"},
    {"boolean", "\"true\" | \"false\""},
    {"null", "\"null\""},
    {"value", "OBJECT | ARRAY | STRING | NUMBER | BOOLEAN | NULL"},
    {"object",
     "\"{\" WS ( STRING WS \":\" WS VALUE WS ( \",\" WS STRING WS \":\" WS VALUE WS )* )? \"}\""},
    {"array", "\"[\" WS ( VALUE WS ( \",\" WS VALUE WS )* )? \"]\""},
    {"date",
     "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] "
     ")"},
    {"time",
     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
     "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
    {"date-time", "DATE \"T\" TIME"},
    {"uuid", "HEX{8} \"-\" HEX{4} \"-\" HEX{4} \"-\" HEX{4} \"-\" HEX{12}"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(const ordered_json& root, std::string prefix)
      : root_(root), prefix_(std::move(prefix)) {}

  JsonSchemaRules run() {
    JsonSchemaRules out;
    out.root = visit(root_, "");
    out.ws_rule = primitive("ws");
    for (const auto& [name, body] : rules_) out.gbnf += name + " ::= " + body + "\n";
    return out;
  }

  std::string primitive(const std::string& name) {
    const std::string rule = prefix_ + name;
    if (defined_.count(rule)) return rule;
    defined_.insert(rule);
    for (const auto& [n, body] : kPrimitives) {
      if (name != n) continue;
      // Upper-case words in the bodies above name other primitives.
      std::string text;
      const std::string b = body;
      for (size_t i = 0; i < b.size();) {
        if (b[i] == '"' || b[i] == '[') {  // copy literals and classes verbatim
          const char close = b[i] == '"' ? '"' : ']';
          size_t j = i + 1;
          while (j < b.size() && b[j] != close) j += b[j] == '\\' ? 2 : 1;
          text += b.substr(i, j + 1 - i);
          i = j + 1;
        } else if (b[i] >= 'A' && b[i] <= 'Z') {
          size_t j = i;
          while (j < b.size() && ((b[j] >= 'A' && b[j] <= 'Z') || b[j] == '-')) ++j;
          std::string word = b.substr(i, j - i);
          for (char& c : word) c = static_cast<char>(c - 'A' + 'a');
          text += primitive(word);
          i = j;
        } else {
          text += b[i++];
        }
      }
      rules_.emplace_back(rule, text);
      return rule;
    }
    fail("json schema: internal: no primitive '", name, "'");
  }

 private:
  const ordered_json& root_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> defined_;
  std::map<std::string, std::string> refs_;  // "$ref" value -> rule name
  int n_rules_ = 0;

  template <typename... Parts>
  [[noreturn]] static void error(const std::string& path, const Parts&... parts) {
    fail("json schema: at ", path.empty() ? "the root" : path, ": ", parts...);
  }

  std::string add_rule(std::string body) {
    std::string name = concat(prefix_, "s", n_rules_++);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // Marks keywords as understood; whatever is left at the end is unsupported.
  struct Keys {
    const ordered_json& schema;
    std::set<std::string> used;
    const ordered_json* get(const char* name) {
      used.insert(name);
      auto it = schema.find(name);
      return it == schema.end() ? nullptr : &*it;
    }
  };

  int count(Keys& keys, const char* name, const std::string& path, int fallback) {
    const ordered_json* v = keys.get(name);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 ||
        v->get<int64_t>() > kMaxGrammarRepetition) {
      error(path, "'", name, "' must be an integer from 0 to ", kMaxGrammarRepetition);
    }
    return static_cast<int>(v->get<int64_t>());
  }

  static std::string repeat(int min, int max) {
    return max < 0 ? concat("{", min, ",}") : concat("{", min, ",", max, "}");
  }

  std::string visit(const ordered_json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) error(path, "the schema 'false' accepts no value");
      return primitive("value");
    }
    if (!schema.is_object()) error(path, "a schema must be an object or a boolean");
    Keys keys{schema, {}};
    const std::string rule = visit_keys(keys, path);
    for (const auto& [key, value] : schema.items()) {
      if (!keys.used.count(key) && !annotations().count(key))
        error(path, "'", key, "' is not supported");
    }
    return rule;
  }

  std::string visit_keys(Keys& keys, const std::string& path) {
    if (const ordered_json* ref = keys.get("$ref")) return reference(*ref, path);
    if (const ordered_json* value = keys.get("const")) {
      keys.get("type");
      return add_rule(gbnf_literal(value->dump()));
    }
    if (const ordered_json* values = keys.get("enum")) {
      keys.get("type");
      if (!values->is_array() || values->empty()) error(path, "'enum' must be a non-empty array");
      std::string body;
      for (const ordered_json& v : *values)
        body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
      return add_rule(body);
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
      if (const ordered_json* options = keys.get(combinator)) {
        if (!options->is_array() || options->empty())
          error(path, "'", combinator, "' must be a non-empty array");
        std::string body;
        for (size_t i = 0; i < options->size(); ++i) {
          body += (i ? " | " : "") + visit((*options)[i], concat(path, "/", combinator, "/", i));
        }
        return add_rule(body);
      }
    }
    if (const ordered_json* all = keys.get("allOf")) {
      if (!all->is_array() || all->size() != 1)
        error(path, "'allOf' is supported with exactly one schema");
      return visit((*all)[0], path + "/allOf/0");
    }

    std::vector<std::string> types;
    if (const ordered_json* type = keys.get("type")) {
      if (type->is_string()) {
        types.push_back(type->get<std::string>());
      } else if (type->is_array() && !type->empty()) {
        for (const ordered_json& t : *type) {
          if (!t.is_string()) error(path, "'type' must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        error(path, "'type' must be a string or an array of strings");
      }
    } else {
      const auto has = [&](const char* k) { return keys.schema.contains(k); };
      if (has("properties") || has("required") || has("additionalProperties")) {
        types.push_back("object");
      } else if (has("items") || has("minItems") || has("maxItems")) {
        types.push_back("array");
      } else if (has("minLength") || has("maxLength") || has("format")) {
        types.push_back("string");
      } else {
        return primitive("value");
      }
    }
    std::string body;
    for (const std::string& type : types) {
      body += (body.empty() ? "" : " | ") + typed(keys, type, path);
    }
    return types.size() == 1 ? body : add_rule(body);
  }

  std::string typed(Keys& keys, const std::string& type, const std::string& path) {
    if (type == "string") return string_rule(keys, path);
    if (type == "number") return primitive("number");
    if (type == "integer") return primitive("int");
    if (type == "boolean") return primitive("boolean");
    if (type == "null") return primitive("null");
    if (type == "object") return object_rule(keys, path);
    if (type == "array") return array_rule(keys, path);
    error(path, "unknown type '", type, "'");
  }

  std::string string_rule(Keys& keys, const std::string& path) {
    const int min = count(keys, "minLength", path, 0);
    const int max = count(keys, "maxLength", path, -1);
    if (max >= 0 && max < min) error(path, "'maxLength' is below 'minLength'");
    if (const ordered_json* format = keys.get("format")) {
      if (!format->is_string()) error(path, "'format' must be a string");
      const std::string name = format->get<std::string>();
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid")
        error(path, "format '", name, "' is not supported (date, time, date-time, uuid are)");
      if (keys.schema.contains("minLength") || keys.schema.contains("maxLength"))
        error(path, "'format' together with 'minLength'/'maxLength' is not supported");
      return add_rule("\"\\\"\" " + primitive(name) + " \"\\\"\"");
    }
    if (min == 0 && max < 0) return primitive("string");
    return add_rule("\"\\\"\" " + primitive("char") + repeat(min, max) + " \"\\\"\"");
  }

  std::string array_rule(Keys& keys, const std::string& path) {
    const int min = count(keys, "minItems", path, 0);
    const int max = count(keys, "maxItems", path, -1);
    if (max >= 0 && max < min) error(path, "'maxItems' is below 'minItems'");
    const ordered_json* items = keys.get("items");
    if (items && items->is_array())
      error(path, "'items' as an array (tuple validation) is not supported");
    const std::string item = items ? visit(*items, path + "/items") : primitive("value");
    const std::string ws = primitive("ws");
    const std::string element = item + " " + ws;
    const std::string more = "( \",\" " + ws + " " + element + " )";
    if (max == 0) return add_rule("\"[\" " + ws + " \"]\"");
    if (min == 0) {
      return add_rule("\"[\" " + ws + " ( " + element + " " + more +
                      repeat(0, max < 0 ? -1 : max - 1) + " )? \"]\"");
    }
    return add_rule("\"[\" " + ws + " " + element + " " + more +
                    repeat(min - 1, max < 0 ? -1 : max - 1) + " \"]\"");
  }

  std::string object_rule(Keys& keys, const std::string& path) {
    const std::string ws = primitive("ws");
    const ordered_json* properties = keys.get("properties");
    const ordered_json* required = keys.get("required");
    const ordered_json* additional = keys.get("additionalProperties");
    if (properties && !properties->is_object()) error(path, "'properties' must be an object");
    if (required && !required->is_array()) error(path, "'required' must be an array");
    if (additional && !additional->is_boolean() && !additional->is_object())
      error(path, "'additionalProperties' must be a boolean or a schema");

    // The properties in document order, then required names not among them (any value).
    std::vector<std::pair<std::string, std::string>> members;  // "\"name\"" literal, value rule
    std::vector<bool> needed;
    std::set<std::string> required_names;
    if (required) {
      for (const ordered_json& name : *required) {
        if (!name.is_string()) error(path, "'required' must hold strings");
        required_names.insert(name.get<std::string>());
      }
    }
    std::set<std::string> listed;
    if (properties) {
      for (const auto& [name, sub] : properties->items()) {
        listed.insert(name);
        members.emplace_back(gbnf_literal(ordered_json(name).dump()),
                             visit(sub, path + "/properties/" + name));
        needed.push_back(required_names.count(name) > 0);
      }
    }
    if (required) {
      for (const ordered_json& name : *required) {
        if (listed.count(name.get<std::string>())) continue;
        listed.insert(name.get<std::string>());
        members.emplace_back(gbnf_literal(name.dump()), primitive("value"));
        needed.push_back(true);
      }
    }

    if (members.empty()) {
      if (additional && additional->is_boolean() && !additional->get<bool>())
        return add_rule("\"{\" " + ws + " \"}\"");
      if (!additional || additional->is_boolean()) return primitive("object");
      const std::string value = visit(*additional, path + "/additionalProperties");
      const std::string member =
          primitive("string") + " " + ws + " \":\" " + ws + " " + value + " " + ws;
      return add_rule("\"{\" " + ws + " ( " + member + " ( \",\" " + ws + " " + member +
                      " )* )? \"}\"");
    }
    // Extra members are never generated: an object with only the listed ones is valid whatever
    // additionalProperties says.
    const size_t n = members.size();
    std::vector<std::string> member_rule(n);
    for (size_t i = 0; i < n; ++i) {
      member_rule[i] = add_rule(members[i].first + " " + ws + " \":\" " + ws + " " +
                                members[i].second + " " + ws);
    }
    // rest[i]: members i.. after at least one was written (each with its comma);
    // first[i]: members i.. when none was written yet. Optional members may be left out.
    std::vector<std::string> rest(n + 1), first(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string tail = rest[i + 1].empty() ? "" : " " + rest[i + 1];
      const std::string with_comma = "\",\" " + ws + " " + member_rule[i];
      rest[i] = add_rule(needed[i] ? with_comma + tail : "( " + with_comma + " )?" + tail);
      std::string body = member_rule[i] + tail;
      if (!needed[i]) body += first[i + 1].empty() ? " | \"\"" : " | " + first[i + 1];
      first[i] = add_rule(body);
    }
    return add_rule("\"{\" " + ws + " " + first[0] + " \"}\"");
  }

  std::string reference(const ordered_json& ref, const std::string& path) {
    if (!ref.is_string()) error(path, "'$ref' must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#')
      error(path, "$ref '", target,
            "' is not supported (only references inside the schema, '#...')");
    const ordered_json* schema = &root_;
    if (target.size() > 1) {
      try {
        schema = &root_.at(ordered_json::json_pointer(target.substr(1)));
      } catch (const ordered_json::exception&) {
        error(path, "$ref '", target, "' does not point into the schema");
      }
    }
    // Named before it is visited, so recursive schemas refer back to it.
    const std::string name = concat(prefix_, "ref", refs_.size());
    refs_.emplace(target, name);
    const size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    rules_[slot].second = visit(*schema, target);
    return name;
  }
};

void check_prefix(std::string_view prefix) {
  for (char c : prefix) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) fail("json schema: rule prefix '", prefix, "' may hold only letters, digits, - and _");
  }
}

}  // namespace

JsonSchemaRules json_schema_rules(const ordered_json& schema, std::string_view prefix) {
  check_prefix(prefix);
  return SchemaCompiler(schema, std::string(prefix)).run();
}

std::string json_schema_to_gbnf(const ordered_json& schema) {
  const JsonSchemaRules rules = json_schema_rules(schema, "");
  return "root ::= " + rules.ws_rule + " " + rules.root + "\n" + rules.gbnf;
}

std::shared_ptr<const Grammar> compile_json_schema(const ordered_json& schema) {
  const std::string gbnf = json_schema_to_gbnf(schema);
  try {
    return compile_gbnf(gbnf);
  } catch (const Error& e) {
    // E.g. a recursive schema that can never finish ({"$ref": "#"} and nothing else).
    fail("json schema: cannot be compiled: ", e.what());
  }
}

std::shared_ptr<const Grammar> compile_json_object_grammar() {
  return compile_json_schema(ordered_json{{"type", "object"}});
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(text, i);
    if (!step.valid) fail("grammar literal: the text is not valid UTF-8");
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      static const char* digits = "0123456789ABCDEF";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    } else {
      out.append(text.substr(i, step.length));
    }
    i += step.length;
  }
  return out + "\"";
}

}  // namespace k25
