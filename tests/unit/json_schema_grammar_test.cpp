// JSON schema to grammar (json_schema_grammar.h): random sentences of each schema's grammar are
// JSON that validates against the schema; documents that violate it are refused; constructs k25
// cannot enforce are errors naming them.
#include "model/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "grammar_walk.h"
#include "json_schema_check.h"
#include "model/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace k25 {
namespace {

using nlohmann::ordered_json;

std::shared_ptr<const GrammarVocabulary> tiny_vocabulary() {
  Vocab v;
  v.tokens = {"</s>", "a"};
  v.types = {TokenType::Control, TokenType::Normal};
  v.eos = 0;
  static const Tokenizer tokenizer(v);
  static const auto vocabulary = std::make_shared<const GrammarVocabulary>(tokenizer);
  return vocabulary;
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  GrammarMatcher m(g, tiny_vocabulary(), {0});
  return m.accept_bytes(text) && m.can_end();
}

struct SchemaCase {
  const char* schema;
  std::vector<const char*> valid;    // documents the grammar must accept
  std::vector<const char*> invalid;  // documents it must refuse
};

const std::vector<SchemaCase>& cases() {
  static const std::vector<SchemaCase> all = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
           "required":["name","age"],"additionalProperties":false})",
       {R"({"name":"Bo","age":3})", R"({ "name" : "a\"\u00e9\n", "age": -12 })"},
       {R"({"age":3,"name":"Bo"})", R"({"name":"Bo"})", R"({"name":"Bo","age":3.5})",
        R"({"name":"Bo","age":3,"x":1})", R"({"name":Bo,"age":3})"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},
           "c":{"type":"number"}},"required":["b"]})",
       {R"({"b":null})", R"({"a":true,"b":null})", R"({"b":null,"c":1.5e3})",
        R"({"a":false,"b":null,"c":-0.25})"},
       {R"({})", R"({"a":true})", R"({"a":true,,"b":null})", R"({,"b":null})", R"({"b":null,})"}},
      {R"({"type":"array","items":{"type":"string","minLength":1,"maxLength":3},
           "minItems":1,"maxItems":3})",
       {R"(["a"])", R"(["abc", "é€😀"])", R"(["x","y","z"])"},
       {R"([])", R"([""])", R"(["abcd"])", R"(["a","b","c","d"])", R"(["a",])"}},
      {R"({"enum":["red","green",3,null,{"k":[1]}]})",
       {R"("red")", R"(3)", R"(null)", R"({"k":[1]})"},
       {R"("blue")", R"(4)", R"("Red")"}},
      {R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")", R"("fixedd")"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})",
       {R"(12)", R"("ab")"},
       {R"("abc")", R"(1.5)", R"(true)"}},
      {R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},
                     "required":["kind","x"],"additionalProperties":false},
                    {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"],
                     "additionalProperties":false}]})",
       {R"({"kind":"a","x":1})", R"({"kind":"b"})"},
       {R"({"kind":"b","x":1})", R"({"kind":"c"})"}},
      {R"({"type":["string","null"]})", {R"("s")", R"(null)"}, {R"(1)"}},
      {R"({"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},
           "y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}},
           "type":"array","items":{"$ref":"#/$defs/point"},"maxItems":2})",
       {R"([{"x":1,"y":2}])", R"([])"},
       {R"([{"x":1}])", R"([{"y":1,"x":2}])"}},
      {R"({"definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},
           "next":{"anyOf":[{"$ref":"#/definitions/node"},{"type":"null"}]}},
           "required":["v","next"],"additionalProperties":false}},"$ref":"#/definitions/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"},
           "u":{"type":"string","format":"uuid"},"t":{"type":"string","format":"date-time"}},
           "required":["d","u","t"]})",
       {R"({"d":"2024-02-29","u":"123e4567-e89b-12d3-a456-426614174000","t":"2024-01-01T10:20:30.5Z"})"},
       {R"({"d":"2024-13-01","u":"123e4567-e89b-12d3-a456-426614174000","t":"2024-01-01T10:20:30Z"})",
        R"({"d":"2024-01-01","u":"123e4567e89b12d3a456426614174000","t":"2024-01-01T10:20:30Z"})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {R"({})", R"({"any":1,"other":2})"},
       {R"({"any":"x"})"}},
      {R"({"type":"object","additionalProperties":false})", {R"({})"}, {R"({"a":1})"}},
      {R"({})", {R"({"a":[1,{"b":null}],"c":"d"})", R"(-1.5)", R"("x")"}, {R"({a:1})"}},
      {R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}})",
       {R"({})", R"({"tags":[]})", R"({"tags":["a","b"]})"},
       {R"({"tags":[1]})"}},
  };
  return all;
}

TEST(JsonSchemaGrammar, AcceptsTheValidAndRefusesTheInvalid) {
  for (const SchemaCase& c : cases()) {
    const ordered_json schema = ordered_json::parse(c.schema);
    const auto grammar = compile_json_schema(schema);
    for (const char* doc : c.valid) {
      EXPECT_TRUE(grammar_accepts(grammar, doc)) << c.schema << "\n  should accept " << doc;
      EXPECT_EQ(testing::schema_violation(ordered_json::parse(doc), schema), "") << doc;
    }
    for (const char* doc : c.invalid) {
      EXPECT_FALSE(grammar_accepts(grammar, doc)) << c.schema << "\n  should refuse " << doc;
    }
  }
}

TEST(JsonSchemaGrammar, EverySentenceOfTheGrammarValidates) {
  std::mt19937_64 rng(7);
  for (const SchemaCase& c : cases()) {
    const ordered_json schema = ordered_json::parse(c.schema);
    const auto grammar = compile_json_schema(schema);
    testing::GrammarWalk walk(*grammar);
    for (int i = 0; i < 200; ++i) {
      const std::string text = walk.sentence(rng, 20);
      ASSERT_TRUE(grammar_accepts(grammar, text)) << text;
      ordered_json value;
      ASSERT_NO_THROW(value = ordered_json::parse(text)) << c.schema << "\n  gave " << text;
      ASSERT_EQ(testing::schema_violation(value, schema), "") << c.schema << "\n  gave " << text;
    }
  }
}

TEST(JsonSchemaGrammar, JsonObjectAcceptsObjectsOnly) {
  const auto g = compile_json_object_grammar();
  EXPECT_TRUE(grammar_accepts(g, R"({"a":[1,2,{"b":"c"}],"d":null})"));
  EXPECT_TRUE(grammar_accepts(g, "\n{ }"));
  EXPECT_FALSE(grammar_accepts(g, "[1]"));
  EXPECT_FALSE(grammar_accepts(g, "\"s\""));
}

TEST(JsonSchemaGrammar, UnsupportedConstructsAreErrorsNamingThem) {
  const std::vector<std::pair<const char*, const char*>> refused = {
      {R"({"type":"string","pattern":"^a+$"})", "at the root: 'pattern' is not supported"},
      {R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})",
       "at /properties/age: 'minimum' is not supported"},
      {R"({"type":"string","format":"email"})", "format 'email' is not supported"},
      {R"({"$ref":"https://example.com/s.json"})", "$ref 'https://example.com/s.json'"},
      {R"({"$ref":"#/$defs/missing"})", "does not point into the schema"},
      {R"({"type":"array","items":[{"type":"string"}]})", "tuple validation"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems' is not supported"},
      {R"({"allOf":[{"type":"string"},{"maxLength":2}]})", "'allOf' is supported with exactly one"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"not":{"type":"string"}})", "'not' is not supported"},
      {R"(false)", "accepts no value"},
      {R"({"type":"string","minLength":5,"maxLength":2})", "'maxLength' is below 'minLength'"},
      {R"({"$ref":"#"})", "json schema: cannot be compiled"},
  };
  for (const auto& [schema, expected] : refused) {
    try {
      compile_json_schema(ordered_json::parse(schema));
      ADD_FAILURE() << schema << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << schema << "\n  gave: " << e.what();
    }
  }
}

TEST(JsonSchemaGrammar, PropertiesComeInDocumentOrder) {
  const auto g = compile_json_schema(ordered_json::parse(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},
          "required":["zeta","alpha"]})"));
  EXPECT_TRUE(grammar_accepts(g, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(grammar_accepts(g, R"({"alpha":2,"zeta":1})"));
}

TEST(JsonSchemaGrammar, RulesEmbedInALargerGrammar) {
  const ordered_json schema = ordered_json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  const JsonSchemaRules a = json_schema_rules(schema, "t0-");
  const JsonSchemaRules b = json_schema_rules(ordered_json::parse(R"({"type":"integer"})"), "t1-");
  for (const JsonSchemaRules* r : {&a, &b}) {
    for (size_t line = 0; line < r->gbnf.size();) {
      EXPECT_EQ(r->gbnf.compare(line, 1, "t"), 0) << r->gbnf.substr(line, 20);
      line = r->gbnf.find('\n', line) + 1;
    }
  }
  const std::string gbnf = "root ::= " + gbnf_literal("<tool_call>\n") + " ( " + a.root + " | " +
                           b.root + " ) " + gbnf_literal("\n</tool_call>") + "\n" + a.gbnf + b.gbnf;
  const auto g = compile_gbnf(gbnf);
  EXPECT_TRUE(grammar_accepts(g, "<tool_call>\n{\"city\": \"Oslo\"}\n</tool_call>"));
  EXPECT_TRUE(grammar_accepts(g, "<tool_call>\n42\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(g, "<tool_call>\n{}\n</tool_call>"));
  EXPECT_THROW(json_schema_rules(schema, "bad prefix"), Error);
}

TEST(JsonSchemaGrammar, GbnfLiteralEscapes) {
  const std::string text = "a\"b\\c\n\t\x01é";
  const auto g = compile_gbnf("root ::= " + gbnf_literal(text) + "\n");
  EXPECT_TRUE(grammar_accepts(g, text));
  EXPECT_THROW(gbnf_literal("\xFF"), Error);
}

}  // namespace
}  // namespace k25
