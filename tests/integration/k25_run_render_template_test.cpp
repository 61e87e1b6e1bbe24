// k25-run render-template as a user runs it: a real template file and conversation file, the
// exact text on stdout, one error: line and exit status 1 when the template raises.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_output.h"

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kShared = K25_SHARED_DIR;
const std::string kRun = std::string(K25_BIN_DIR) + "/k25-run";

using Output = k25::testing::CommandOutput;

Output run(const std::string& args) {
  return k25::testing::run_capturing(kRun + " " + args);
}

ojson expected_line(const std::string& tmpl, const std::string& conversation) {
  std::ifstream in(kShared + "/chat-templates/expected.jsonl");
  for (std::string line; std::getline(in, line);) {
    ojson j = ojson::parse(line);
    if (j["template"] == tmpl && j["conversation"] == conversation) return j;
  }
  return ojson();
}

class RenderTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kShared + "/chat-templates/expected.jsonl"))
        << "../shared/chat-templates is missing";
    dir_ = fs::temp_directory_path() / ("k25_rt_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes conversation `id` of conversations.json to a file and returns its path.
  std::string conversation_file(const std::string& id) {
    std::ifstream in(kShared + "/chat-templates/conversations.json");
    const ojson all = ojson::parse(in);
    for (const ojson& c : all["conversations"]) {
      if (c["id"] == id) {
        const std::string path = (dir_ / (id + ".json")).string();
        std::ofstream(path) << c.dump();
        return path;
      }
    }
    ADD_FAILURE() << "no conversation " << id;
    return "";
  }

  std::string args_for(const ojson& line) {
    std::string a = "render-template --template " + kShared + "/chat-templates/templates/" +
                    line["template"].get<std::string>() + ".jinja --conversation " +
                    conversation_file(line["conversation"].get<std::string>()) + " --bos-token '" +
                    line["bos_token"].get<std::string>() + "' --eos-token '" +
                    line["eos_token"].get<std::string>() + "'";
    if (line["add_generation_prompt"].get<bool>()) a += " --add-generation-prompt";
    if (line.contains("extra_vars")) {
      for (const auto& [k, v] : line["extra_vars"].items()) {
        std::string value = v.dump();
        std::string quoted;
        for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        a += " --var '" + k + "=" + quoted + "'";
      }
    }
    return a;
  }

  fs::path dir_;
};

TEST_F(RenderTemplate, PrintsTheReferenceRenderingExactly) {
  for (const auto& [tmpl, conv] :
       {std::pair{"Qwen-Qwen3-0.6B", "4_tool_call"},
        std::pair{"meta-llama-Llama-3.1-8B-Instruct", "5_unicode_tricky"},
        std::pair{"mistralai-Ministral-3-14B-Reasoning-2512", "3_multi_turn_no_system_no_gen"}}) {
    const ojson line = expected_line(tmpl, conv);
    ASSERT_TRUE(line.contains("rendered")) << tmpl;
    const Output o = run(args_for(line));
    ASSERT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, line["rendered"].get<std::string>()) << tmpl << " / " << conv;
  }
}

TEST_F(RenderTemplate, PassesExtraVariables) {
  const ojson line = expected_line("fireworks-ai-llama-3-firefunction-v2", "4_tool_call");
  ASSERT_TRUE(line.contains("extra_vars"));
  const Output o = run(args_for(line));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, line["rendered"].get<std::string>());
}

TEST_F(RenderTemplate, TemplateErrorIsOneErrorLineAndExitOne) {
  const ojson line = expected_line("google-gemma-2-2b-it", "2_system_multi_turn");
  ASSERT_TRUE(line.contains("error"));
  const Output o = run(args_for(line));
  EXPECT_EQ(o.status, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("System role not supported"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

TEST_F(RenderTemplate, BadInputsAreErrors) {
  const std::string conv = conversation_file("1_single_user");
  const std::string broken = (dir_ / "broken.jinja").string();
  std::ofstream(broken) << "{% for m in messages %}{{ m.content }}";
  Output o = run("render-template --template " + broken + " --conversation " + conv);
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("error: template TemplateSyntaxError"), std::string::npos) << o.err;

  const std::string ok = (dir_ / "ok.jinja").string();
  std::ofstream(ok) << "{{ x }}";
  o = run("render-template --template " + ok + " --conversation " + conv + " --var 'x={bad'");
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("not JSON"), std::string::npos) << o.err;

  const std::string not_conv = (dir_ / "c.json").string();
  std::ofstream(not_conv) << "[1]";
  o = run("render-template --template " + ok + " --conversation " + not_conv);
  EXPECT_EQ(o.status, 1);
  EXPECT_NE(o.err.find("messages"), std::string::npos) << o.err;
}

}  // namespace
