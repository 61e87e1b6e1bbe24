// Constrained decoding through the real k25-server with stories260K: response_format json_schema
// and json_object on the OpenAI endpoints (streaming too), "grammar" and "json_schema" on
// /generate; outputs parse and validate, and a schema or grammar k25 cannot compile is a 400 that
// names the construct.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../unit/json_schema_check.h"
#include "server_process.h"

namespace k25::testing {
namespace {

using json = nlohmann::ordered_json;  // the schema keeps its property order on the wire
using nlohmann::ordered_json;

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "hero": {"type": "string", "minLength": 1, "maxLength": 16},
    "age": {"type": "integer"},
    "friends": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2},
    "mood": {"enum": ["happy", "sad"]}
  },
  "required": ["hero", "age", "friends", "mood"],
  "additionalProperties": false
})";

class Constrained : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    server_ = new ServerProcess(
        {"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml", "--model",
         std::string(K25_SHARED_DIR) + "/models/stories260K.gguf", "--threads", "1"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  HttpResult post(const std::string& target, const json& body) {
    return http_call(server_->port(), "POST", target, body.dump());
  }
  static ServerProcess* server_;
};
ServerProcess* Constrained::server_ = nullptr;

json schema_format() {
  return {{"type", "json_schema"},
          {"json_schema", {{"name", "story"}, {"strict", true}, {"schema", json::parse(kSchema)}}}};
}

void expect_valid(const std::string& text) {
  ordered_json value;
  ASSERT_NO_THROW(value = ordered_json::parse(text)) << text;
  EXPECT_EQ(schema_violation(value, ordered_json::parse(kSchema)), "") << text;
  // Properties come in the schema's order.
  EXPECT_EQ(value.begin().key(), "hero") << text;
}

TEST_F(Constrained, ChatJsonSchemaOutputsValidate) {
  for (int seed = 1; seed <= 5; ++seed) {
    HttpResult r = post("/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "Tell me a story."}}}},
                         {"max_tokens", 300},
                         {"temperature", 1.0},
                         {"seed", seed},
                         {"response_format", schema_format()}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
    expect_valid(j["choices"][0]["message"]["content"]);
  }
}

TEST_F(Constrained, StreamedCompletionIsTheSameObject) {
  const json body = {{"prompt", "Once upon a time"},
                     {"max_tokens", 300},
                     {"temperature", 0},
                     {"response_format", schema_format()}};
  HttpResult whole = post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const std::string text = json::parse(whole.body)["choices"][0]["text"];
  expect_valid(text);
  json streaming = body;
  streaming["stream"] = true;
  HttpResult s = post("/v1/completions", streaming);
  ASSERT_EQ(s.status, 200) << s.body;
  std::string streamed;
  for (const std::string& event : sse_data(s.body)) {
    if (event == "[DONE]") break;
    const json chunk = json::parse(event);
    if (!chunk["choices"].empty()) streamed += chunk["choices"][0].value("text", "");
  }
  EXPECT_EQ(streamed, text);
}

// Free-form JSON (strings and members without bounds) still ends, whole, within max_tokens: the
// sampler closes it as the budget runs out (docs/constrained-decoding.md).
TEST_F(Constrained, JsonObjectGivesAnObjectWithinMaxTokens) {
  for (int seed = 1; seed <= 6; ++seed) {
    for (int max_tokens : {40, 200}) {
      HttpResult r = post("/v1/chat/completions",
                          {{"messages", {{{"role", "user"}, {"content", "JSON please"}}}},
                           {"max_tokens", max_tokens},
                           {"temperature", 1},
                           {"seed", seed},
                           {"response_format", {{"type", "json_object"}}}});
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = json::parse(r.body);
      const std::string content = j["choices"][0]["message"]["content"];
      EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << content;
      EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), max_tokens);
      json value;
      ASSERT_NO_THROW(value = json::parse(content)) << content;
      EXPECT_TRUE(value.is_object()) << content;
    }
  }
}

// A schema that bounds nothing (as zod's and pydantic's schemas usually are): this model would
// write its first string until max_tokens; the answer still ends, whole and valid.
TEST_F(Constrained, FreeStringsAndArraysEndWithinMaxTokens) {
  const ordered_json story = ordered_json::parse(R"({"type": "object", "properties": {
    "title": {"type": "string"}, "mood": {"enum": ["happy", "sad", "scary"]},
    "characters": {"type": "array", "items": {"type": "string"}}, "has_dog": {"type": "boolean"}},
    "required": ["title", "mood", "characters", "has_dog"], "additionalProperties": false})");
  for (int seed = 1; seed <= 6; ++seed) {
    for (int max_tokens : {60, 300}) {
      HttpResult r = post(
          "/v1/chat/completions",
          {{"messages", {{{"role", "user"}, {"content", "A story about a girl and her dog."}}}},
           {"max_tokens", max_tokens},
           {"temperature", 1},
           {"seed", seed},
           {"response_format",
            {{"type", "json_schema"},
             {"json_schema", {{"name", "story"}, {"strict", true}, {"schema", story}}}}}});
      ASSERT_EQ(r.status, 200) << r.body;
      const json j = json::parse(r.body);
      const std::string content = j["choices"][0]["message"]["content"];
      EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << content;
      ordered_json value;
      ASSERT_NO_THROW(value = ordered_json::parse(content)) << content;
      EXPECT_EQ(schema_violation(value, story), "") << content;
    }
  }
}

TEST_F(Constrained, GenerateTakesAGrammarOrASchema) {
  for (int seed = 1; seed <= 4; ++seed) {
    HttpResult r =
        post("/generate", {{"prompt", "Once upon a time"},
                           {"max_tokens", 50},
                           {"temperature", 1.0},
                           {"seed", seed},
                           {"grammar", "root ::= (\"yes\" | \"no\") \", \" [a-z]{1,6}\n"}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    const std::string text = j["text"];
    EXPECT_EQ(j["finish_reason"], "stop") << text;
    EXPECT_TRUE(text.rfind("yes, ", 0) == 0 || text.rfind("no, ", 0) == 0) << text;
  }
  HttpResult r = post("/generate", {{"prompt", "Once"},
                                    {"max_tokens", 300},
                                    {"temperature", 0},
                                    {"json_schema", json::parse(kSchema)}});
  ASSERT_EQ(r.status, 200) << r.body;
  expect_valid(json::parse(r.body)["text"]);
}

TEST_F(Constrained, MaxTokensBeforeTheEndGivesLength) {
  HttpResult r = post("/v1/completions", {{"prompt", "Once"},
                                          {"max_tokens", 4},
                                          {"temperature", 0},
                                          {"response_format", schema_format()}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["finish_reason"], "length");
}

TEST_F(Constrained, WhatCannotBeCompiledIsA400NamingIt) {
  json bad_schema = schema_format();
  bad_schema["json_schema"]["schema"]["properties"]["hero"]["pattern"] = "^[A-Z]";
  HttpResult r = post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"response_format", bad_schema}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("at /properties/hero: 'pattern' is not supported"), std::string::npos)
      << r.body;
  r = post("/v1/completions",
           {{"prompt", "x"}, {"response_format", {{"type", "json_schema"}, {"json_schema", 1}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("response_format"), std::string::npos) << r.body;
  r = post("/v1/completions", {{"prompt", "x"}, {"response_format", {{"type", "yaml"}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("unknown type 'yaml'"), std::string::npos) << r.body;
  r = post("/generate",
           {{"prompt", "x"}, {"grammar", "root ::= expr\nexpr ::= expr \"+\" | \"1\"\n"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("line 2, column 1: left recursion (expr -> expr)"), std::string::npos)
      << r.body;
  r = post("/generate", {{"prompt", "x"}, {"grammar", "root ::= \"a"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("unterminated string literal"), std::string::npos) << r.body;
  // The server still serves.
  EXPECT_EQ(http_call(server_->port(), "GET", "/health").status, 200);
}

}  // namespace
}  // namespace k25::testing
