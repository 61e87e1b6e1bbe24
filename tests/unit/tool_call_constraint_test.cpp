// The constraint pieces of a forced tool call: for every format, an output built from them and
// filled with valid calls parses back into those calls.
#include "server/tool_call_constraint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/tool_call_parser.h"

namespace k25 {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "search"}}])");

const ToolCallFormat kFormats[] = {ToolCallFormat::Hermes,     ToolCallFormat::QwenXml,
                                   ToolCallFormat::GlmXml,     ToolCallFormat::ToolCallsTag,
                                   ToolCallFormat::Llama3Json, ToolCallFormat::Firefunction,
                                   ToolCallFormat::Mistral,    ToolCallFormat::DeepSeek,
                                   ToolCallFormat::KimiK2,     ToolCallFormat::CohereAction};

ToolCallConstraint constraint(ToolCallFormat format, const ToolRequest& r) {
  return tool_call_constraint(format, r, ordered_json(r.tools));
}

ToolRequest request(ToolChoiceMode choice, bool parallel, std::string name = "") {
  ToolRequest r;
  r.tools = kTools;
  r.choice = choice;
  r.forced_name = std::move(name);
  r.parallel = parallel;
  return r;
}

const json* property(const json& schema, const std::string& key) {
  if (!schema.contains("properties") || !schema["properties"].contains(key)) return nullptr;
  return &schema["properties"][key];
}

// The call object (or the array of one, or the bare arguments) that `schema` describes for the
// call `name(arguments)`; null when the schema does not allow that tool.
json instance(const json& schema, const std::string& name, const json& arguments) {
  if (schema.contains("anyOf")) {
    for (const json& alternative : schema["anyOf"]) {
      json value = instance(alternative, name, arguments);
      if (!value.is_null()) return value;
    }
    return nullptr;
  }
  if (schema.value("type", "") == "array") {
    json item = instance(schema["items"], name, arguments);
    return item.is_null() ? json() : json::array({item});
  }
  for (const char* name_key : {"name", "tool_name"}) {
    if (const json* n = property(schema, name_key)) {
      if ((*n)["const"] != name) return nullptr;
      json out = json::object();
      if (property(schema, "tool_call_id")) out["tool_call_id"] = "0";
      out[name_key] = name;
      out[property(schema, "arguments") ? "arguments" : "parameters"] = arguments;
      return out;
    }
  }
  return arguments;  // the tool's parameters schema itself
}

// The output made of the constraint's pieces with the given calls (one part per call: the first
// alternative whose schema allows the call).
std::string fill(const ToolCallConstraint& c,
                 const std::vector<std::pair<std::string, json>>& calls) {
  std::string out = c.begin;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) out += c.separator;
    bool placed = false;
    for (const ToolCallConstraintPart& part : c.alternatives) {
      if (part.prefix.find("[TOOL_CALLS]") != std::string::npos ||
          part.prefix.find("tool_call_begin") != std::string::npos ||
          part.prefix.find("tool▁call▁begin") != std::string::npos) {
        if (part.prefix.find(calls[i].first) == std::string::npos) continue;
      }
      json value = instance(json(part.schema), calls[i].first, calls[i].second);
      if (value.is_null()) continue;
      out += part.prefix + value.dump() + part.suffix;
      placed = true;
      break;
    }
    EXPECT_TRUE(placed) << calls[i].first;
  }
  return out + c.end;
}

TEST(ToolCallConstraint, AFilledConstraintParsesBackInEveryFormat) {
  const std::pair<std::string, json> weather = {"get_weather", {{"city", "Paris"}}};
  const std::pair<std::string, json> search = {"search", json::object()};
  for (ToolCallFormat format : kFormats) {
    const ToolCallConstraint c = constraint(format, request(ToolChoiceMode::Required, false));
    for (const auto& call : {weather, search}) {
      const std::string text = fill(c, {call});
      ToolCallParse p = parse_tool_calls(format, text, kTools);
      ASSERT_EQ(p.calls.size(), 1u) << tool_call_format_name(format) << ": " << text;
      EXPECT_EQ(p.calls[0].name, call.first);
      EXPECT_EQ(json::parse(p.calls[0].arguments), call.second);
      EXPECT_EQ(p.content, "");
    }
  }
}

TEST(ToolCallConstraint, ParallelCallsParseBackWhereTheFormatHasThem) {
  for (ToolCallFormat format : kFormats) {
    const ToolCallConstraint c = constraint(format, request(ToolChoiceMode::Required, true));
    const bool array_form =
        c.alternatives.size() == 1 && c.alternatives[0].schema.value("type", "") == "array";
    if (!c.repeat && !array_form) continue;  // Llama 3.x: one call per turn
    std::string text;
    if (array_form) {
      const ToolCallConstraintPart& part = c.alternatives[0];
      json calls = instance(json(part.schema), "get_weather", {{"city", "Paris"}});
      calls.push_back(instance(json(part.schema), "search", json::object())[0]);
      EXPECT_FALSE(part.schema.contains("maxItems"));
      text = c.begin + part.prefix + calls.dump() + part.suffix + c.end;
    } else {
      text = fill(c, {{"get_weather", {{"city", "Paris"}}}, {"search", json::object()}});
    }
    ToolCallParse p = parse_tool_calls(format, text, kTools);
    ASSERT_EQ(p.calls.size(), 2u) << tool_call_format_name(format) << ": " << text;
    EXPECT_EQ(p.calls[1].name, "search");
  }
}

TEST(ToolCallConstraint, ANamedChoiceAllowsOnlyThatTool) {
  for (ToolCallFormat format : kFormats) {
    const ToolCallConstraint c =
        constraint(format, request(ToolChoiceMode::Named, false, "search"));
    const std::string dump = json(c.alternatives.size()).dump() + [&] {
      std::string all;
      for (const auto& part : c.alternatives) all += part.prefix + part.schema.dump();
      return all;
    }();
    EXPECT_EQ(dump.find("get_weather"), std::string::npos) << tool_call_format_name(format);
    ToolCallParse p = parse_tool_calls(format, fill(c, {{"search", json::object()}}), kTools);
    ASSERT_EQ(p.calls.size(), 1u) << tool_call_format_name(format);
    EXPECT_EQ(p.calls[0].name, "search");
  }
}

TEST(ToolCallConstraint, NoParallelCallsMeansOneCall) {
  const ToolCallConstraint hermes =
      constraint(ToolCallFormat::Hermes, request(ToolChoiceMode::Required, false));
  EXPECT_FALSE(hermes.repeat);
  const ToolCallConstraint tagged =
      constraint(ToolCallFormat::ToolCallsTag, request(ToolChoiceMode::Required, false));
  EXPECT_EQ(tagged.alternatives[0].schema["maxItems"], 1);
  // The call object's schema pins the name and carries the tool's parameters.
  const json schema = json(hermes.alternatives[0].schema["anyOf"][0]);
  EXPECT_EQ(schema["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(schema["properties"]["arguments"], kTools[0]["function"]["parameters"]);
  EXPECT_EQ(schema["required"], json::array({"name", "arguments"}));
}

TEST(ToolCallConstraint, SchemasKeepTheRequestsKeyOrder) {
  // The name comes before the arguments, and the properties in the order the client gave them.
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function": {
    "name": "f", "parameters": {"type": "object", "properties": {"zeta": {"type": "string"},
    "alpha": {"type": "integer"}}, "required": ["zeta", "alpha"]}}}])");
  ToolRequest r;
  r.tools = json(tools);
  r.choice = ToolChoiceMode::Required;
  const ToolCallConstraint c = tool_call_constraint(ToolCallFormat::Hermes, r, tools);
  std::vector<std::string> keys, arguments;
  for (const auto& [key, value] : c.alternatives[0].schema["properties"].items())
    keys.push_back(key);
  for (const auto& [key, value] :
       c.alternatives[0].schema["properties"]["arguments"]["properties"].items())
    arguments.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"name", "arguments"}));
  EXPECT_EQ(arguments, (std::vector<std::string>{"zeta", "alpha"}));
}

}  // namespace
}  // namespace k25
