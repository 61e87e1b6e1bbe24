// The real k25-server with a model that has its own chat template (random-qwen3.gguf: Qwen2's
// ChatML template and vocabulary): the template renders the request, and special-token text typed
// by a user stays ordinary tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string qwen3_model() {
  return std::string(K25_SHARED_DIR) + "/models/random-qwen3.gguf";
}

std::string stories_model() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

std::string write_template(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

class ChatTemplateServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    raise_file_limit();
    if (std::filesystem::exists(qwen3_model())) {
      server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                   "--model", qwen3_model(), "--threads", "1"});
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << qwen3_model() << " is missing"; }

  json chat(const json& body, int expect_status = 200) {
    HttpResult r = http_call(server_->port(), "POST", "/v1/chat/completions", body.dump());
    EXPECT_EQ(r.status, expect_status) << r.body;
    return json::parse(r.body);
  }
  int prompt_tokens(const std::string& content) {
    json j = chat({{"messages", {{{"role", "user"}, {"content", content}}}},
                   {"max_tokens", 1},
                   {"temperature", 0}});
    return j["usage"]["prompt_tokens"].get<int>();
  }

  static ServerProcess* server_;
};
ServerProcess* ChatTemplateServer::server_ = nullptr;

TEST_F(ChatTemplateServer, UsesTheModelsTemplate) {
  HttpResult models = http_call(server_->port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["meta"]["chat_template"], "model");
}

TEST_F(ChatTemplateServer, TypedSpecialTokenIsNotAControlToken) {
  // "X" is one token. Parsed as a special token, "<|im_start|>" would be one as well; as text it
  // is several ordinary tokens.
  const int plain = prompt_tokens("X");
  const int typed = prompt_tokens("<|im_start|>");
  EXPECT_GE(typed - plain, 3) << "plain " << plain << ", typed " << typed;
}

TEST_F(ChatTemplateServer, ToolsAndToolMessagesRender) {
  const json body = json::parse(R"({
    "max_tokens": 1, "temperature": 0,
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call1", "content": "18 C"}]})");
  // This model's template (Qwen2's first one) ignores tools; the request must still render.
  EXPECT_GT(chat(body)["usage"]["prompt_tokens"].get<int>(), 10);
}

TEST_F(ChatTemplateServer, MalformedMessagesAre400) {
  json e = chat({{"messages", {{{"role", "user"}, {"content", 5}}}}}, 400);
  EXPECT_EQ(e["error"]["param"], "messages");
  e = chat({{"messages", {{{"role", "assistant"}, {"tool_calls", "x"}}}}}, 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("tool_calls"), std::string::npos);
  HttpResult health = http_call(server_->port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
}

// --chat-template FILE replaces the model's template (stories260K has none): the prompt is the
// file's rendering, and the tool-call format is read from the file.
TEST(ChatTemplateFile, ReplacesTheModelsTemplate) {
  ASSERT_TRUE(std::filesystem::exists(stories_model())) << stories_model() << " is missing";
  const std::string file = write_template(
      "k25_override.jinja",
      "{% for m in messages %}[INST]{{ m.content }}[/INST]{% endfor %}"
      "{% if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}"
      "{# assistant calls: [TOOL_CALLS]name[ARGS]{...} #}"
      "{% if messages[0].content == 'boom' %}{{ raise_exception('the override is in use') }}"
      "{% endif %}");
  ServerProcess server({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml", "--model",
                        stories_model(), "--threads", "1", "--chat-template", file});
  HttpResult models = http_call(server.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json meta = json::parse(models.body)["data"][0]["meta"];
  EXPECT_EQ(meta["chat_template"], "file");
  EXPECT_EQ(meta["tool_call_format"], "mistral");
  // The file's template renders the chat: it answers, and its raise_exception is the 400.
  const auto chat = [&](const std::string& content) {
    const json body = {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 2}};
    return http_call(server.port(), "POST", "/v1/chat/completions", body.dump());
  };
  HttpResult ok = chat("Once upon a time");
  EXPECT_EQ(ok.status, 200) << ok.body;
  HttpResult raised = chat("boom");
  EXPECT_EQ(raised.status, 400) << raised.body;
  EXPECT_EQ(json::parse(raised.body)["error"]["message"], "chat template: the override is in use");
}

// A missing file or one that does not parse stops the start with one clear error line.
TEST(ChatTemplateFile, MissingOrUnparsableFileStopsTheStart) {
  const std::string server = std::string(K25_BIN_DIR) + "/k25-server --model " + stories_model();
  auto [missing_rc, missing] =
      run_command(server + " --chat-template /no/such/template.jinja 2>&1");
  EXPECT_EQ(missing_rc, 1) << missing;
  EXPECT_NE(missing.find("error: config: model.chat_template: '/no/such/template.jinja': cannot "
                         "open the file"),
            std::string::npos)
      << missing;
  const std::string bad = write_template("k25_unparsable.jinja", "{% if messages %}x");
  auto [bad_rc, unparsable] = run_command(server + " --chat-template " + bad + " 2>&1");
  EXPECT_EQ(bad_rc, 1) << unparsable;
  EXPECT_NE(unparsable.find("error: config: model.chat_template: '" + bad + "' does not parse"),
            std::string::npos)
      << unparsable;
}

// stories260K with Hermes 2 Pro's pair of templates: its ChatML default as
// tokenizer.chat_template and its tool_use template as tokenizer.chat_template.tool_use.
std::string hermes_tool_use_template() {
  return read_file(std::string(K25_SHARED_DIR) +
                   "/chat-templates/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja");
}

std::string write_model_with_tool_use_variant() {
  const auto stories = k25::GgufFile::open(stories_model());
  k25::GgufWriter w;
  for (const auto& [key, value] : stories->metadata()) w.set(key, value);
  w.set_string("tokenizer.chat_template",
               "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + "
               "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}"
               "{{ '<|im_start|>assistant\n' }}{% endif %}");
  w.set_string("tokenizer.chat_template.tool_use", hermes_tool_use_template());
  // Room for the tool_use template's long system prompt (~800 of stories260K's tokens; its 512
  // would refuse it). Nonsense answers either way; only the prompt is under test.
  w.set_u32("llama.context_length", 2048);
  for (const k25::TensorView& t : stories->tensors()) {
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                 t.data, t.bytes);
  }
  const std::string path = ::testing::TempDir() + "/k25_stories_tool_use.gguf";
  w.write(path);
  return path;
}

// A request with tools renders with the model's tool_use variant, one without with the default;
// --chat-template replaces both. The Hermes tool_use template cannot render a request without
// tools (TypeError, 400), so the default must be the one in use there.
TEST(ChatTemplateVariants, ToolsRequestRendersWithTheToolUseVariant) {
  ASSERT_TRUE(std::filesystem::exists(stories_model())) << stories_model() << " is missing";
  const std::string model = write_model_with_tool_use_variant();
  const json no_tools = {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                         {"max_tokens", 1}};
  json with_tools = no_tools;
  with_tools["tools"] = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const auto post = [](int port, const json& body) {
    return http_call(port, "POST", "/v1/chat/completions", body.dump());
  };
  const auto prompt_tokens = [](const HttpResult& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json::parse(r.body)["usage"]["prompt_tokens"].get<int>() : -1;
  };
  const std::vector<std::string> common = {
      "--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml", "--threads", "1"};

  std::vector<std::string> args = common;
  args.insert(args.end(), {"--model", model});
  ServerProcess variants(args);
  HttpResult models = http_call(variants.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json meta = json::parse(models.body)["data"][0]["meta"];
  EXPECT_EQ(meta["chat_template"], "model");
  EXPECT_EQ(meta["chat_template_tool_use"], true);
  EXPECT_EQ(meta["tool_call_format"], "hermes");
  const int default_tokens = prompt_tokens(post(variants.port(), no_tools));
  const int tool_use_tokens = prompt_tokens(post(variants.port(), with_tools));

  // The same tool_use template given as the file: the tools request gives exactly the same
  // prompt, and without tools it is the template's TypeError (the file replaced the default).
  args = common;
  args.insert(args.end(),
              {"--model", model, "--chat-template",
               write_template("k25_hermes_tool_use.jinja", hermes_tool_use_template())});
  ServerProcess file(args);
  EXPECT_EQ(prompt_tokens(post(file.port(), with_tools)), tool_use_tokens);
  const HttpResult refused = post(file.port(), no_tools);
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("TypeError"), std::string::npos) << refused.body;
  // The ChatML default ignores tools; the tool_use template lists them in a long system prompt.
  EXPECT_GT(tool_use_tokens, default_tokens + 100);
}

}  // namespace
}  // namespace k25::testing
