// Every line of ../shared/chat-templates/expected.jsonl, rendered as its README says: the
// conversation from conversations.json, bos/eos/add_generation_prompt/extra_vars from the line,
// strftime_now fixed to 2026-12-01 00:00:00. `rendered` lines must match byte for byte, `error`
// lines must fail with a template error.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/jinja_error.h"

namespace k25 {
namespace {

using ojson = nlohmann::ordered_json;

struct Case {
  std::string name;  // template__conversation, for the test name
  ojson line;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string test_name(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  std::ifstream in(testing::shared_path("chat-templates/expected.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ojson j = ojson::parse(line);
    cases.push_back(
        {test_name(j["template"].get<std::string>() + "__" + j["conversation"].get<std::string>()),
         std::move(j)});
  }
  // A missing file is one failing case, never a silent pass.
  if (cases.empty()) cases.push_back({"expected_jsonl_missing", ojson()});
  return cases;
}

const ojson& conversation(const std::string& id) {
  static const ojson all =
      ojson::parse(read_file(testing::shared_path("chat-templates/conversations.json")));
  for (const ojson& c : all["conversations"]) {
    if (c["id"] == id) return c;
  }
  static const ojson none;
  return none;
}

std::tm fixed_time() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 11;
  tm.tm_mday = 1;
  tm.tm_wday = 2;  // a Tuesday
  tm.tm_yday = 334;
  return tm;
}

class ChatTemplateConformance : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateConformance, MatchesJinja2) {
  const ojson& line = GetParam().line;
  ASSERT_FALSE(line.is_null()) << "chat-templates/expected.jsonl is missing or empty";
  const std::string path = line["template_path"].get<std::string>();
  const std::string source = read_file(testing::shared_path(path.substr(path.find('/') + 1)));
  ASSERT_FALSE(source.empty()) << path;
  const ojson& conv = conversation(line["conversation"].get<std::string>());
  ASSERT_FALSE(conv.is_null());

  ChatPromptInput input;
  input.messages = conv["messages"];
  input.tools = conv["tools"];
  input.add_generation_prompt = line["add_generation_prompt"].get<bool>();
  if (line.contains("extra_vars")) input.extra_vars = line["extra_vars"];
  jinja::RenderOptions options;
  options.now = fixed_time;

  std::string rendered;
  std::string error, error_class, error_message;
  try {
    ChatPromptTemplate t(source, line["bos_token"].get<std::string>(),
                         line["eos_token"].get<std::string>(), options);
    rendered = t.render(input).text;
  } catch (const jinja::TemplateError& e) {
    error = e.what();
    error_class = jinja::error_kind_name(e.kind());
    error_message = e.message();
  }
  if (line.contains("rendered")) {
    ASSERT_EQ(error, "");
    EXPECT_EQ(rendered, line["rendered"].get<std::string>());
  } else {
    // "<Python class>: <message>"; our error names the same class, and a raise_exception()
    // message is the template's own text.
    const std::string expected = line["error"].get<std::string>();
    ASSERT_NE(error, "") << "expected " << expected << ", rendered:\n" << rendered;
    EXPECT_EQ(error_class, expected.substr(0, expected.find(':'))) << error;
    if (error_class == "TemplateError") {
      EXPECT_EQ(error_message, expected.substr(expected.find(':') + 2));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ExpectedJsonl, ChatTemplateConformance, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace k25
