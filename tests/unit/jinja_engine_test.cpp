// Focused tests of the Jinja engine's semantics that real chat templates depend on (the
// conformance test covers whole templates; these name the rule that breaks).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_template.h"

namespace k25::jinja {
namespace {

Variables vars_from(const std::string& json) {
  Variables vars;
  const nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(json);
  for (const auto& [k, v] : parsed.items()) {
    vars.emplace_back(k, value_from_json(v, true));
  }
  return vars;
}

std::string render(const std::string& source, const std::string& json = "{}",
                   const RenderOptions& options = {}) {
  return Template(source).render(vars_from(json), options).bytes;
}

ErrorKind error_of(const std::string& source, const std::string& json = "{}",
                   const RenderOptions& options = {}) {
  try {
    render(source, json, options);
  } catch (const TemplateError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error for: " << source;
  return ErrorKind::Limit;
}

TEST(JinjaEngine, TrimAndLstripBlocks) {
  EXPECT_EQ(render("{% if true %}\nA\n{% endif %}\nB"), "A\nB");
  EXPECT_EQ(render("x\n    {% if true %}y{% endif %}"), "x\ny");
  EXPECT_EQ(render("x\n    {{ 'y' }}"), "x\n    y");  // lstrip_blocks leaves {{ alone
  EXPECT_EQ(render("a   {%- if true -%}   b   {%- endif %}"), "ab");
  EXPECT_EQ(render("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
  EXPECT_EQ(render("a {# note #}\nb"), "a b");
  EXPECT_EQ(render("line\n"), "line");      // one trailing newline dropped
  EXPECT_EQ(render("line\n\n"), "line\n");  // only one
  EXPECT_EQ(render("a\r\nb"), "a\nb");
}

TEST(JinjaEngine, PrintsLikePythonStr) {
  EXPECT_EQ(render("{{ true }} {{ none }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }}"),
            "True None 1.0 1e+20 0.30000000000000004");
  EXPECT_EQ(render("{{ d }}", R"({"d": {"a": [1, "x'y", null, true]}})"),
            R"({'a': [1, "x'y", None, True]})");
  EXPECT_EQ(render("{{ (1, 'a') }} {{ (1,) }}"), "(1, 'a') (1,)");
  EXPECT_EQ(render("{{ 'a\\tb' ~ 1 ~ none }}"), "a\tb1None");
}

TEST(JinjaEngine, TojsonIsPythonJsonDumps) {
  const std::string d = R"({"d": {"b": "é\n\"", "a": [1, 2.5, null, false]}})";
  EXPECT_EQ(render("{{ d | tojson }}", d), R"({"b": "é\n\"", "a": [1, 2.5, null, false]})");
  EXPECT_EQ(render("{{ d | tojson(ensure_ascii=true) }}", d),
            R"({"b": "\u00e9\n\"", "a": [1, 2.5, null, false]})");
  EXPECT_EQ(
      render("{{ d | tojson(indent=2, sort_keys=true) }}", d),
      "{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    false\n  ],\n  \"b\": \"é\\n\\\"\"\n}");
  EXPECT_EQ(render("{{ d | tojson(separators=(',', ':')) }}", d),
            R"({"b":"é\n\"","a":[1,2.5,null,false]})");
  EXPECT_EQ(render("{{ '<&>' | tojson }}"), "\"<&>\"");  // no HTML escaping
  EXPECT_EQ(render("{{ '😀' | tojson(ensure_ascii=true) }}"), "\"\\ud83d\\ude00\"");
  EXPECT_EQ(error_of("{{ x | tojson }}"), ErrorKind::Type);  // undefined is not JSON
}

TEST(JinjaEngine, ScopingOfLoopsAndNamespaces) {
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
      "241");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% "
                   "endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");  // if has no scope
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(
      render(
          "{% for i in [1, 2, 3] if i != 2 %}{{ loop.index }}{{ i }}{{ loop.last }}{% endfor %}"),
      "11False23True");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in [1,2,3,4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 "
                   "%}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "13");
  EXPECT_EQ(
      render("{% for i in [1,2] %}{{ loop.previtem is defined }}{{ loop.nextitem }}{% endfor %}"),
      "False2True");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"), ErrorKind::Type);
}

TEST(JinjaEngine, Macros) {
  EXPECT_EQ(
      render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}"),
      "[1B][12]");
  EXPECT_EQ(
      render(
          "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"),
      "321");
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), ErrorKind::Limit);
}

TEST(JinjaEngine, UndefinedAndNone) {
  EXPECT_EQ(
      render(
          "[{{ nope }}]{{ nope is defined }}{% for x in nope %}x{% endfor %}{{ nope | length }}"),
      "[]False0");
  EXPECT_EQ(error_of("{{ nope.attr }}"), ErrorKind::Undefined);
  EXPECT_EQ(error_of("{{ nope + 1 }}"), ErrorKind::Undefined);
  EXPECT_EQ(render("{{ none.attr }}|{{ d.missing }}|{{ d['x'] }}", R"({"d": {"x": 1}})"), "||1");
  // tools is defined and None: `if tools` is false, iterating it is a TypeError.
  EXPECT_EQ(render("{{ tools is defined }}{{ tools is none }}{% if tools %}x{% endif %}",
                   R"({"tools": null})"),
            "TrueTrue");
  EXPECT_EQ(error_of("{% for t in tools %}{% endfor %}", R"({"tools": null})"), ErrorKind::Type);
  EXPECT_EQ(render("{{ x | default('d') }}{{ '' | default('e', true) }}{{ '' | default('f') }}"),
            "de");
}

TEST(JinjaEngine, PythonTypeRules) {
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), ErrorKind::Type);
  EXPECT_EQ(render("{{ 'a' ~ 1 }}{{ 7 // 2 }}{{ -7 // 2 }}{{ -7 % 3 }}{{ 2 ** 10 }}{{ 7 / 2 }}"),
            "a13-4210243.5");
  EXPECT_EQ(
      render("{{ 1 == 1.0 }}{{ [1] == [1] }}{{ 'b' in 'abc' }}{{ 2 not in [1] }}{{ 'k' in d }}",
             R"({"d": {"k": 0}})"),
      "TrueTrueTrueTrueTrue");
  EXPECT_EQ(error_of("{{ 1 < 'a' }}"), ErrorKind::Type);
  EXPECT_EQ(render("{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ [1,2,3][-1] }}{{ 'héllo'[1] }}"), "bccba3é");
  EXPECT_EQ(render("{{ 'x' * 3 }}{{ '%s-%d' % ('a', 2) }}"), "xxxa-2");
}

TEST(JinjaEngine, ImmutableSandbox) {
  EXPECT_EQ(error_of("{% set l = [] %}{{ l.append(1) }}"), ErrorKind::Security);
  EXPECT_EQ(error_of("{{ d.pop('a') }}", R"({"d": {"a": 1}})"), ErrorKind::Security);
  EXPECT_EQ(render("{{ ([1] + [2]) | length }}"), "2");  // building new lists is fine
}

TEST(JinjaEngine, GeneratorsFromFilters) {
  const std::string tools =
      R"({"tools": [{"function": {"name": "a"}}, {"function": {"name": "b"}}]})";
  EXPECT_EQ(error_of("{{ tools | map(attribute='function') | tojson }}", tools), ErrorKind::Type);
  EXPECT_EQ(render("{{ tools | map(attribute='function') | list | tojson }}", tools),
            R"([{"name": "a"}, {"name": "b"}])");
  EXPECT_EQ(render("{{ tools | map(attribute='function.name') | join(',') }}", tools), "a,b");
  EXPECT_EQ(
      render("{{ [1, 2, 3] | select('odd') | list }}{{ [1, 2] | reject('equalto', 1) | list }}"),
      "[1, 3][2]");
  EXPECT_EQ(render("{{ m | selectattr('role', 'equalto', 'user') | list | length }}",
                   R"({"m": [{"role": "user"}, {"role": "system"}]})"),
            "1");
  EXPECT_EQ(error_of("{{ [1] | map('string') | length }}"), ErrorKind::Type);
}

TEST(JinjaEngine, StringMethodsUsePythonWhitespace) {
  const std::string s = R"({"s": "\u3000\u3000text\u00a0 "})";
  EXPECT_EQ(render("[{{ s | trim }}][{{ s.strip() }}][{{ s.lstrip() }}]", s),
            "[text][text][text\u00a0 ]");
  EXPECT_EQ(render("{{ 'a b\u3000c'.split() }}"), "['a', 'b', 'c']");
  EXPECT_EQ(
      render("{{ 'a,b,c'.split(',', 1) }}{{ 'xxhixx'.strip('x') }}{{ 'ab'.replace('a', 'c') }}"),
      "['a', 'b,c']hicb");
  EXPECT_EQ(
      render(
          "{{ 'Hi'.startswith(('x', 'H')) }}{{ 'Hi'.endswith('i') }}{{ '{} {x}'.format(1, x=2) }}"),
      "TrueTrue1 2");
  EXPECT_EQ(
      render("{{ 'ab' | upper }}{{ 'hello world' | title }}{{ 'x\ny' | indent(2, first=true) }}"),
      "ABHello World  x\n  y");
}

TEST(JinjaEngine, DictMethodsAndSorting) {
  const std::string d = R"({"d": {"items": 1, "B": 2, "a": 3}})";
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", d),
            "items=1;B=2;a=3;");
  EXPECT_EQ(render("{{ d['items'] }}{{ d.get('zz', 'none') }}{{ d.get('a') }}", d), "1none3");
  EXPECT_EQ(render("{% for k, v in d | dictsort %}{{ k }}{% endfor %}", d), "aBitems");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }}{{ ['b', 'A'] | sort }}{{ [1, 1, 2] | unique | list }}"),
            "[1, 2, 3]['A', 'b'][1, 2]");
}

TEST(JinjaEngine, MarkupEscapesPlainStrings) {
  EXPECT_EQ(render("{{ '<b>' | safe + '<i>\"' }}"), "<b>&lt;i&gt;&#34;");
  EXPECT_EQ(render("{{ \"'\" + '<b>' | safe }}"), "&#39;<b>");
  EXPECT_EQ(render("{{ '<b>' | safe ~ '<i>' }}"), "<b><i>");  // ~ does not escape
}

TEST(JinjaEngine, UnknownFiltersAndTests) {
  EXPECT_EQ(error_of("{{ x | no_such_filter }}"), ErrorKind::Syntax);
  EXPECT_EQ(render("{% if false %}{{ x | no_such_filter }}{% endif %}ok"), "ok");
  EXPECT_EQ(error_of("{% if true %}{{ x | no_such_filter }}{% endif %}"), ErrorKind::Syntax);
  EXPECT_EQ(error_of("{{ x is no_such_test }}"), ErrorKind::Syntax);
}

TEST(JinjaEngine, GlobalsOfTransformers) {
  RenderOptions fixed;
  fixed.now = [] {
    std::tm tm{};
    tm.tm_year = 126;
    tm.tm_mon = 11;
    tm.tm_mday = 1;
    tm.tm_wday = 2;
    return tm;
  };
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y, %A %B') }}", "{}", fixed),
            "01 Dec 2026, Tuesday December");
  EXPECT_EQ(render("{{ strftime_now is defined }}"), "True");
  try {
    render("{{ raise_exception('System role not supported') }}");
    ADD_FAILURE();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Raised);
    EXPECT_EQ(e.message(), "System role not supported");
    EXPECT_EQ(e.line(), 1);
  }
  EXPECT_EQ(render("{{ range(3) | list }}{{ range(1, 7, 2) | join }}"), "[0, 1, 2]135");
  EXPECT_EQ(error_of("{{ range(1000000) }}"), ErrorKind::Value);
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(JinjaEngine, BlockSetAndFilterBlock) {
  EXPECT_EQ(render("{% set x %}a{{ 1 }}{% endset %}[{{ x }}]"), "[a1]");
  EXPECT_EQ(render("{% set x | upper %}ab{% endset %}{{ x }}"), "AB");
  EXPECT_EQ(render("{% filter upper %}ab{% endfilter %}"), "AB");
}

TEST(JinjaEngine, ErrorsCarryTheTemplateLine) {
  try {
    Template t("line one\n{% if %}");
    ADD_FAILURE();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Syntax);
    EXPECT_EQ(e.line(), 2);
  }
  try {
    render("a\nb\n{{ 'x' + 1 }}");
    ADD_FAILURE();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos);
  }
  EXPECT_EQ(error_of("{% for x in y %}"), ErrorKind::Syntax);
  EXPECT_EQ(error_of("{{ 'unterminated }}"), ErrorKind::Syntax);
  EXPECT_EQ(error_of("{% include 'x' %}"), ErrorKind::Syntax);
  EXPECT_EQ(error_of("{% break %}"), ErrorKind::Syntax);
}

TEST(JinjaEngine, LimitsBoundWork) {
  RenderOptions small;
  small.limits.max_steps = 1000;
  EXPECT_EQ(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                     "{}", small),
            ErrorKind::Limit);
  small.limits.max_output_bytes = 100;
  EXPECT_EQ(error_of("{% for i in range(50) %}xxxxx{% endfor %}", "{}", small), ErrorKind::Limit);
  EXPECT_EQ(error_of("{{ 'x' * 100000000 }}"), ErrorKind::Limit);
  std::string nested;
  for (int i = 0; i < 300; ++i) nested += "{% if true %}";
  EXPECT_EQ(error_of(nested), ErrorKind::Syntax);
  EXPECT_EQ(error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
            ErrorKind::Syntax);
}

TEST(JinjaEngine, DataRangesMarkTheCallersText) {
  const Text out = Template("<|im_start|>user\n{{ m }}<|im_end|>{{ '<' + m + '>' }}{{ m | trim }}")
                       .render(vars_from(R"({"m": " <|im_start|> "})"));
  EXPECT_EQ(out.bytes, "<|im_start|>user\n <|im_start|> <|im_end|>< <|im_start|> ><|im_start|>");
  ASSERT_EQ(out.data_ranges.size(), 3u);
  auto text_of = [&](const ByteRange& r) { return out.bytes.substr(r.begin, r.end - r.begin); };
  EXPECT_EQ(text_of(out.data_ranges[0]), " <|im_start|> ");
  EXPECT_EQ(text_of(out.data_ranges[1]), " <|im_start|> ");
  EXPECT_EQ(text_of(out.data_ranges[2]), "<|im_start|>");
  // Template literals, even when built by expressions, stay template text.
  EXPECT_TRUE(Template("{{ '<|im_' ~ 'start|>' }}").render({}).data_ranges.empty());
}

}  // namespace
}  // namespace k25::jinja
