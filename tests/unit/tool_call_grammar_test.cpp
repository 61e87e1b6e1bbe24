// The grammar of a forced tool call (tool_call_grammar.h): in every format it accepts the
// format's rendering of a call, refuses calls of tools that are not allowed, and every random
// sentence of it parses with parse_tool_calls into calls of the allowed tools whose arguments
// validate.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "grammar_walk.h"
#include "json_schema_check.h"
#include "model/grammar_matcher.h"
#include "server/api_error.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace k25 {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
   "required": ["city", "unit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
   "properties": {"query": {"type": "string", "maxLength": 8},
   "tags": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}}}}}])");

const ToolCallFormat kFormats[] = {ToolCallFormat::Hermes,     ToolCallFormat::QwenXml,
                                   ToolCallFormat::GlmXml,     ToolCallFormat::ToolCallsTag,
                                   ToolCallFormat::Llama3Json, ToolCallFormat::Firefunction,
                                   ToolCallFormat::Mistral,    ToolCallFormat::DeepSeek,
                                   ToolCallFormat::KimiK2,     ToolCallFormat::CohereAction};

ToolRequest request(ToolChoiceMode choice, bool parallel, std::string name = "") {
  ToolRequest r;
  r.tools = json(kTools);
  r.choice = choice;
  r.forced_name = std::move(name);
  r.parallel = parallel;
  return r;
}

std::shared_ptr<const GrammarVocabulary> tiny_vocabulary() {
  Vocab v;
  v.tokens = {"</s>", "a"};
  v.types = {TokenType::Control, TokenType::Normal};
  v.eos = 0;
  static const Tokenizer tokenizer(v);
  static const auto vocabulary = std::make_shared<const GrammarVocabulary>(tokenizer);
  return vocabulary;
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, tiny_vocabulary(), {0});
  return m.accept_bytes(text) && m.can_end();
}

// The call `name(arguments)` as the format writes it (the JSON spaced as the templates print it).
std::string rendering(ToolCallFormat format, const std::string& name, const std::string& args) {
  const std::string object = R"({"name": ")" + name + R"(", "arguments": )" + args + "}";
  switch (format) {
    case ToolCallFormat::Hermes:
    case ToolCallFormat::QwenXml:
    case ToolCallFormat::GlmXml:
      return "<tool_call>\n" + object + "\n</tool_call>";
    case ToolCallFormat::ToolCallsTag:
      return "<tool_calls>[" + object + "]</tool_calls>";
    case ToolCallFormat::Llama3Json:
      return R"({"name": ")" + name + R"(", "parameters": )" + args + "}";
    case ToolCallFormat::Firefunction:
      return " functools[" + object + "]";
    case ToolCallFormat::Mistral:
      return "[TOOL_CALLS]" + name + "[ARGS]" + args;
    case ToolCallFormat::DeepSeek:
      return "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + args +
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    case ToolCallFormat::KimiK2:
      return "<|tool_calls_section_begin|><|tool_call_begin|>functions." + name +
             ":0<|tool_call_argument_begin|>" + args +
             "<|tool_call_end|><|tool_calls_section_end|>";
    case ToolCallFormat::CohereAction:
      return R"(<|START_ACTION|>[{"tool_call_id": "0", "tool_name": ")" + name +
             R"(", "parameters": )" + args + "}]<|END_ACTION|>";
  }
  return "";
}

const char* kWeatherArgs = R"({"city": "Paris", "unit": "celsius"})";

TEST(ToolCallGrammar, AcceptsTheRenderingOfEveryFormat) {
  for (ToolCallFormat format : kFormats) {
    const char* label = tool_call_format_name(format);
    const auto grammar = compile_gbnf(
        forced_tool_call_grammar(format, request(ToolChoiceMode::Required, false), kTools));
    const std::string weather = rendering(format, "get_weather", kWeatherArgs);
    ASSERT_EQ(parse_tool_calls(format, weather, json(kTools)).calls.size(), 1u) << label;
    EXPECT_TRUE(accepts(grammar, weather)) << label << ": " << weather;
    EXPECT_TRUE(accepts(grammar, rendering(format, "search", R"({"query":"x","tags":[1,2]})")))
        << label;
    EXPECT_TRUE(accepts(grammar, rendering(format, "search", "{}"))) << label;
    // Not a call of an offered tool, arguments against the schema, text instead of a call.
    EXPECT_FALSE(accepts(grammar, rendering(format, "get_time", kWeatherArgs))) << label;
    EXPECT_FALSE(accepts(grammar, rendering(format, "get_weather", R"({"city": "Paris"})")))
        << label;
    EXPECT_FALSE(accepts(grammar, rendering(format, "search", R"({"query":"much too long"})")))
        << label;
    EXPECT_FALSE(accepts(grammar, "The weather is fine.")) << label;
  }
}

TEST(ToolCallGrammar, ANamedChoiceAcceptsOnlyThatTool) {
  for (ToolCallFormat format : kFormats) {
    const auto grammar = compile_gbnf(forced_tool_call_grammar(
        format, request(ToolChoiceMode::Named, true, "get_weather"), kTools));
    EXPECT_TRUE(accepts(grammar, rendering(format, "get_weather", kWeatherArgs)))
        << tool_call_format_name(format);
    EXPECT_FALSE(accepts(grammar, rendering(format, "search", "{}")))
        << tool_call_format_name(format);
  }
}

TEST(ToolCallGrammar, RandomSentencesParseIntoValidCallsOfTheAllowedTools) {
  std::mt19937_64 rng(17);
  for (ToolCallFormat format : kFormats) {
    for (const ToolRequest& r :
         {request(ToolChoiceMode::Required, false), request(ToolChoiceMode::Required, true),
          request(ToolChoiceMode::Named, true, "search")}) {
      const std::string label =
          concat(tool_call_format_name(format), r.forced_name, r.parallel ? " parallel" : "");
      const auto grammar = compile_gbnf(forced_tool_call_grammar(format, r, kTools));
      testing::GrammarWalk walk(*grammar);
      for (int i = 0; i < 30; ++i) {
        const std::string text = walk.sentence(rng, 10);
        const ToolCallParse parsed = parse_tool_calls(format, text, json(kTools));
        ASSERT_FALSE(parsed.calls.empty()) << label << ": " << text;
        EXPECT_EQ(parsed.content, "") << label << ": " << text;
        if (!r.parallel) {
          EXPECT_EQ(parsed.calls.size(), 1u) << label << ": " << text;
        }
        for (const ToolCall& call : parsed.calls) {
          if (!r.forced_name.empty()) {
            EXPECT_EQ(call.name, r.forced_name) << label;
          }
          const ordered_json& tool =
              kTools[call.name == "get_weather" ? 0 : 1]["function"]["parameters"];
          EXPECT_EQ(testing::schema_violation(ordered_json::parse(call.arguments), tool), "")
              << label << ": " << text;
        }
      }
    }
  }
}

TEST(ToolCallGrammar, ASchemaThatCannotBeEnforcedIsA400NamingTheTool) {
  ordered_json tools = kTools;
  tools[1]["function"]["parameters"]["properties"]["query"]["pattern"] = "^a";
  try {
    forced_tool_call_grammar(ToolCallFormat::Hermes, request(ToolChoiceMode::Required, true),
                             tools);
    FAIL() << "compiled";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().status, 400);
    EXPECT_NE(e.error().message.find("tools[1].function.parameters"), std::string::npos)
        << e.error().message;
    EXPECT_NE(e.error().message.find("'pattern' is not supported"), std::string::npos)
        << e.error().message;
  }
  // A tool the named choice leaves out is not compiled.
  EXPECT_NO_THROW(forced_tool_call_grammar(
      ToolCallFormat::Hermes, request(ToolChoiceMode::Named, true, "get_weather"), tools));
}

}  // namespace
}  // namespace k25
