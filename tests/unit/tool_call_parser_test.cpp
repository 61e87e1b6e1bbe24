// Tool-call parsing per format: the real renderings of an assistant's tool call by each template
// of ../shared/chat-templates (conversation 4) parse back into the conversation's call, and the
// streaming parser gives the same answer however the text is split.
#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "server/tool_call_format.h"
#include "server/tool_call_stream.h"
#include "test_paths.h"

namespace k25 {
namespace {

using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const json& conversation_4() {
  static const json conversation = [] {
    json all = json::parse(read_file(testing::shared_path("chat-templates/conversations.json")));
    for (const json& c : all["conversations"])
      if (c["id"] == "4_tool_call") return c;
    return json();
  }();
  return conversation;
}

const json& tools_4() {
  return conversation_4()["tools"];
}

// The call of conversation 4, as the parser returns it.
ToolCall weather_call() {
  return {"", "get_weather", R"({"city":"Paris","unit":"celsius"})"};
}

// expected.jsonl's renderings of conversation 4, by template.
std::map<std::string, std::string> renderings_4() {
  std::map<std::string, std::string> out;
  std::ifstream in(testing::shared_path("chat-templates/expected.jsonl"));
  EXPECT_TRUE(in);
  for (std::string line; std::getline(in, line);) {
    json l = json::parse(line);
    if (l["conversation"] == "4_tool_call" && l.contains("rendered")) {
      out[l["template"]] = l["rendered"];
    }
  }
  return out;
}

// Each template whose tool-call format k25 reads: the format, and where the assistant's turn
// with the call begins and ends in the rendering.
struct TemplateCase {
  std::string name;
  ToolCallFormat format;
  std::string turn_start;
  std::string turn_end;
};

const std::vector<TemplateCase>& covered_templates() {
  static const std::vector<TemplateCase> cases = {
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::Hermes, "assistant\n", "<|im_end|>"},
      {"Qwen-Qwen3-0.6B", ToolCallFormat::Hermes, "assistant\n", "<|im_end|>"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", ToolCallFormat::Hermes, "assistant\n",
       "<|im_end|>"},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::Hermes, "assistant\n",
       "<|im_end|>"},
      {"MiMo-VL", ToolCallFormat::Hermes, "assistant\n", "<|im_end|>"},
      {"Bielik-11B-v3.0-Instruct", ToolCallFormat::Hermes, "assistant\n", "<|im_end|>"},
      {"ibm-granite-granite-4.0", ToolCallFormat::Hermes, "<|end_of_role|>", "<|end_of_text|>"},
      {"ibm-granite-granite-4.1", ToolCallFormat::Hermes, "<|end_of_role|>", "<|end_of_text|>"},
      {"Reka-Edge", ToolCallFormat::Hermes, "assistant: ", "<sep>"},
      {"Qwen3.5-4B", ToolCallFormat::QwenXml, "assistant\n", "<|im_end|>"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", ToolCallFormat::QwenXml, "assistant\n", "<|im_end|>"},
      {"StepFun3.5-Flash", ToolCallFormat::QwenXml, "assistant\n", "<|im_end|>"},
      {"GLM-4.6", ToolCallFormat::GlmXml, "<|assistant|>", "<|observation|>"},
      {"poolside-Laguna-XS.2", ToolCallFormat::GlmXml, "<assistant>", "</assistant>"},
      {"poolside-Laguna-XS-2.1", ToolCallFormat::GlmXml, "<assistant>", "</assistant>"},
      {"Apriel-1.6-15b-Thinker-fixed", ToolCallFormat::ToolCallsTag, "<|begin_assistant|>",
       "<|end|>"},
      {"MiniMax-M1", ToolCallFormat::ToolCallsTag, "ai name=assistant\n", "<end_of_sentence>"},
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::Llama3Json,
       "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallFormat::Llama3Json,
       "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"fireworks-ai-llama-3-firefunction-v2", ToolCallFormat::Firefunction,
       "assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::Mistral, "[/INST]", "</s>"},
      {"mistralai-Ministral-3-14B-Reasoning-2512", ToolCallFormat::Mistral, "[/INST]", "</s>"},
      {"unsloth-mistral-Devstral-Small-2507", ToolCallFormat::Mistral, "[/INST]", "</s>"},
      {"deepseek-ai-DeepSeek-V3.1", ToolCallFormat::DeepSeek, "<｜Assistant｜>",
       "<｜end▁of▁sentence｜>"},
      {"moonshotai-Kimi-K2", ToolCallFormat::KimiK2, "<|im_middle|>", "<|im_end|>"},
      {"Cohere2MoE", ToolCallFormat::CohereAction, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
  };
  return cases;
}

// Templates whose call syntax k25 does not read (they get the Hermes parser, which finds
// nothing in their syntax), or that render no call for conversation 4.
const std::set<std::string> kNotCovered = {
    "deepseek-ai-DeepSeek-V4", "deepseek-ai-DeepSeek-V4-Flash-0731",  // <｜DSML｜invoke>
    "MiniMax-M3", "muse-glimmer", "openbmb-MiniCPM5-1B",              // other invoke XML
    "google-gemma-4-31B-it", "LFM2.5-8B-A1B", "Kimi-K3",              // own syntaxes
    "GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B",
    "CohereForAI-c4ai-command-r-plus-tool_use",  // "Action:" + a ```json block
    // No call in their rendering of conversation 4, or it raises:
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "LFM2-8B-A1B", "LFM2.5-Instruct",
    "ibm-granite-granite-3.3-2B-Instruct", "microsoft-Phi-3.5-mini-instruct",
    "llama-cpp-rwkv-world", "google-gemma-2-2b-it", "Kimi-K2-Instruct", "llama-cpp-deepseek-r1",
    "meetkai-functionary-medium-v3.2"};

// The assistant turn that carries the call, without its end marker.
std::string assistant_turn(const std::string& rendered, const TemplateCase& c) {
  const size_t question = rendered.find("in celsius?");
  EXPECT_NE(question, std::string::npos) << c.name;
  const size_t start = rendered.find(c.turn_start, question);
  EXPECT_NE(start, std::string::npos) << c.name;
  const size_t from = start + c.turn_start.size();
  const size_t end = rendered.find(c.turn_end, from);
  EXPECT_NE(end, std::string::npos) << c.name;
  return rendered.substr(from, end - from);
}

void expect_same(const ToolCallParse& a, const ToolCallParse& b, const std::string& label) {
  EXPECT_EQ(a.content, b.content) << label;
  EXPECT_EQ(a.calls, b.calls) << label;
}

// Streams `text` in pieces of the given sizes (cycled) and puts the result together.
ToolCallParse stream_in_pieces(ToolCallFormat format, const std::string& text, const json& tools,
                               const std::function<size_t()>& next_size) {
  ToolCallStream stream(format, tools);
  ToolCallParse out;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(next_size(), text.size() - pos);
    out.content += stream.push(std::string_view(text).substr(pos, n));
    pos += n;
  }
  ToolCallParse last = stream.finish();
  out.content += last.content;
  out.calls = last.calls;
  return out;
}

void expect_stream_matches(ToolCallFormat format, const std::string& text, const json& tools) {
  const ToolCallParse whole = parse_tool_calls(format, text, tools);
  expect_same(stream_in_pieces(format, text, tools, [] { return size_t{1}; }), whole,
              "1-byte pieces of " + text);
  for (size_t split = 0; split <= text.size(); ++split) {
    ToolCallStream stream(format, tools);
    ToolCallParse two;
    two.content = stream.push(std::string_view(text).substr(0, split));
    two.content += stream.push(std::string_view(text).substr(split));
    ToolCallParse last = stream.finish();
    two.content += last.content;
    two.calls = last.calls;
    expect_same(two, whole, "split at " + std::to_string(split) + " of " + text);
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::uniform_int_distribution<size_t> size(1, 9);
    expect_same(stream_in_pieces(format, text, tools, [&] { return size(rng); }), whole,
                "random pieces of " + text);
  }
}

TEST(ToolCallParser, EveryTemplateIsCoveredOrListedAsNot) {
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::shared_path("chat-templates/templates"))) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = entry.path().stem().string();
    bool covered = false;
    for (const TemplateCase& c : covered_templates()) covered = covered || c.name == name;
    EXPECT_NE(covered, kNotCovered.count(name) > 0) << name;
  }
}

TEST(ToolCallParser, FormatIsDetectedFromTheTemplateText) {
  for (const TemplateCase& c : covered_templates()) {
    const std::string text =
        read_file(testing::shared_path("chat-templates/templates/" + c.name + ".jinja"));
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(text)), tool_call_format_name(c.format))
        << c.name;
  }
  EXPECT_EQ(detect_tool_call_format(""), ToolCallFormat::Hermes);
}

TEST(ToolCallParser, RealRenderingsOfConversation4ParseIntoItsCall) {
  const auto renderings = renderings_4();
  ASSERT_FALSE(tools_4().is_null());
  for (const TemplateCase& c : covered_templates()) {
    auto it = renderings.find(c.name);
    ASSERT_NE(it, renderings.end()) << c.name;
    const std::string turn = assistant_turn(it->second, c);
    const ToolCallParse parsed = parse_tool_calls(c.format, turn, tools_4());
    ASSERT_EQ(parsed.calls.size(), 1u) << c.name << ": " << turn;
    EXPECT_EQ(parsed.calls[0], weather_call()) << c.name;
    EXPECT_EQ(parsed.content.find("get_weather"), std::string::npos) << c.name;
    expect_stream_matches(c.format, turn, tools_4());
  }
}

TEST(ToolCallParser, TextAroundTheCallIsContentTrimmedAtTheSeams) {
  const std::string text =
      "  Let me look.\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": "
      "\"k25\"}}\n</tool_call>\n";
  ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text, tools_4());
  EXPECT_EQ(p.content, "  Let me look.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "search");
  EXPECT_EQ(p.calls[0].arguments, R"({"query":"k25"})");
  expect_stream_matches(ToolCallFormat::Hermes, text, tools_4());
}

TEST(ToolCallParser, ParallelCallsInEveryFormat) {
  const std::vector<std::pair<ToolCallFormat, std::string>> cases = {
      {ToolCallFormat::Hermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": "
       "\"{\\\"query\\\": \\\"k25\\\"}\"}\n</tool_call>"},
      {ToolCallFormat::QwenXml,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter="
       "unit>\ncelsius\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=search>\n"
       "<parameter=query>\nk25\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallFormat::GlmXml,
       "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>"
       "unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call><tool_call>search\n<arg_key>"
       "query</arg_key>\n<arg_value>k25</arg_value>\n</tool_call>"},
      {ToolCallFormat::ToolCallsTag,
       "<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}}\n{\"name\": \"search\", \"arguments\": {\"query\": \"k25\"}}\n</tool_calls>"},
      {ToolCallFormat::Llama3Json,
       "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}}; {\"name\": \"search\", \"parameters\": {\"query\": \"k25\"}}"},
      {ToolCallFormat::Firefunction,
       " functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}}, {\"name\": \"search\", \"arguments\": {\"query\": \"k25\"}}]"},
      {ToolCallFormat::Mistral,
       "[TOOL_CALLS]get_weather[CALL_ID]abcdefghi[ARGS]{\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}[TOOL_CALLS]search[ARGS]{\"query\": \"k25\"}"},
      {ToolCallFormat::Mistral,
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
       "\"celsius\"}, \"id\": \"abcdefghi\"}, {\"name\": \"search\", \"arguments\": {\"query\": "
       "\"k25\"}}]"},
      {ToolCallFormat::DeepSeek,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", "
       "\"unit\": "
       "\"celsius\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"query\":"
       " \"k25\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::DeepSeek,  // R1
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>"
       "function<｜tool▁sep｜>search\n```json\n{\"query\": \"k25\"}\n```<｜tool▁call▁end｜>"
       "<｜tool▁calls▁end｜>"},
      {ToolCallFormat::KimiK2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
       "argument_begin|>{\"city\": \"Paris\", \"unit\": \"celsius\"}<|tool_call_end|><|tool_call_"
       "begin|>functions.search:1<|tool_call_argument_begin|>{\"query\": \"k25\"}<|tool_call_end|>"
       "<|tool_calls_section_end|>"},
      {ToolCallFormat::CohereAction,
       "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
       "\"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}},\n    {\"tool_call_id\": "
       "\"1\", \"tool_name\": \"search\", \"parameters\": {\"query\": \"k25\"}}\n]<|END_ACTION|>"},
  };
  const std::vector<ToolCall> expected = {weather_call(), {"", "search", R"({"query":"k25"})"}};
  for (const auto& [format, text] : cases) {
    ToolCallParse p = parse_tool_calls(format, text, tools_4());
    EXPECT_EQ(p.calls, expected) << tool_call_format_name(format) << ": " << text;
    EXPECT_EQ(p.content, "") << text;
    expect_stream_matches(format, text, tools_4());
  }
}

TEST(ToolCallParser, XmlValuesAreTypedByTheParameterSchema) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{
      "type":"object","properties":{"n":{"type":"integer"},"s":{"type":"string"},
      "o":{"type":"object"}}}}}])");
  ToolCallParse p = parse_tool_calls(
      ToolCallFormat::QwenXml,
      "<tool_call>\n<function=f>\n<parameter=n>\n42\n</parameter>\n<parameter=s>\n42\n</parameter>"
      "\n<parameter=o>\n{\"a\": [1]}\n</parameter>\n</function>\n</tool_call>",
      tools);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(R"({"n":42,"s":"42","o":{"a":[1]}})"));
}

// Found by tool_call_fuzz: XML values are the model's bytes, which need not be UTF-8.
TEST(ToolCallParser, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  ToolCallParse p = parse_tool_calls(
      ToolCallFormat::QwenXml,
      "<tool_call>\n<function=search>\n<parameter=q\xfc>\nk\xff\n</parameter>\n</function>\n"
      "</tool_call>",
      tools_4());
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"q\xEF\xBF\xBD\":\"k\xEF\xBF\xBD\"}");
}

TEST(ToolCallParser, WhatDoesNotParseStaysContentUnchanged) {
  const std::vector<std::pair<ToolCallFormat, std::string>> cases = {
      {ToolCallFormat::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"argu"},  // cut off
      {ToolCallFormat::Hermes, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>"},
      {ToolCallFormat::Hermes, "<tool_call>[1, 2]</tool_call>"},
      {ToolCallFormat::Hermes, "<tool_call>{\"name\": 3}</tool_call>"},
      {ToolCallFormat::Hermes, "<tool_call>{\"name\": \"search\", \"arguments\": 5}</tool_call>"},
      {ToolCallFormat::Hermes, "a <tool_call> b"},
      {ToolCallFormat::Llama3Json, "Here: {\"name\": \"search\", \"parameters\": {}}"},
      {ToolCallFormat::Llama3Json, "{\"answer\": 42}"},
      {ToolCallFormat::Mistral, "[TOOL_CALLS]search{\"query\": \"x\"}"},
      {ToolCallFormat::DeepSeek, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search"},
      {ToolCallFormat::KimiK2, "<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>"},
      {ToolCallFormat::QwenXml, "<tool_call>\n<function=search>\n<parameter=query>\nx"},
      {ToolCallFormat::GlmXml, "<tool_call>search\n<arg_key>query</arg_key>x</tool_call>"},
  };
  for (const auto& [format, text] : cases) {
    ToolCallParse p = parse_tool_calls(format, text, tools_4());
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
    expect_stream_matches(format, text, tools_4());
  }
}

TEST(ToolCallParser, PlainTextStreamsOnWithoutWaitingForTheEnd) {
  ToolCallStream stream(ToolCallFormat::Hermes, tools_4());
  EXPECT_EQ(stream.push("Hello there"), "Hello there");
  EXPECT_EQ(stream.push(", friend <tool"), ", friend");  // a marker may be starting
  EXPECT_EQ(stream.push("box> ok"), " <toolbox> ok");
  EXPECT_EQ(stream.push("\n"), "");  // whitespace waits: calls may follow
  EXPECT_EQ(stream.push("<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>"), "");
  ToolCallParse last = stream.finish();
  EXPECT_EQ(last.content, "");
  ASSERT_EQ(last.calls.size(), 1u);
  EXPECT_EQ(last.calls[0].arguments, "{}");
}

}  // namespace
}  // namespace k25
