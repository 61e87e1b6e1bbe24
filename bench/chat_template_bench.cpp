// The cost of rendering a chat template per request (the template is parsed once at model
// load): a few real templates from ../shared/chat-templates on its 4-message tool-call and
// 6-message reasoning conversations. Also the one-off parse cost.
//   build/bin/chat_template_bench
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tokenizer/chat_prompt.h"

namespace k25 {
namespace {

using ojson = nlohmann::ordered_json;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kDir = std::string(K25_SHARED_DIR) + "/chat-templates/";

ChatPromptInput conversation(const std::string& id) {
  const ojson all = ojson::parse(read(kDir + "conversations.json"));
  ChatPromptInput in;
  for (const ojson& c : all["conversations"]) {
    if (c["id"] == id) {
      in.messages = c["messages"];
      in.tools = c["tools"];
    }
  }
  return in;
}

void BM_Render(benchmark::State& state, const char* name, const char* conv) {
  const ChatPromptTemplate t(read(kDir + "templates/" + name + ".jinja"), "<s>", "</s>");
  const ChatPromptInput in = conversation(conv);
  size_t bytes = 0;
  for (auto _ : state) bytes += t.render(in).text.size();
  benchmark::DoNotOptimize(bytes);
}

void BM_Parse(benchmark::State& state, const char* name) {
  const std::string source = read(kDir + "templates/" + name + ".jinja");
  for (auto _ : state) benchmark::DoNotOptimize(ChatPromptTemplate(source, "", ""));
}

BENCHMARK_CAPTURE(BM_Render, qwen3_tools, "Qwen-Qwen3-0.6B", "4_tool_call")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3_reasoning, "Qwen-Qwen3-0.6B", "6_reasoning_multi_turn")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, llama31_tools, "meta-llama-Llama-3.1-8B-Instruct", "4_tool_call")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, gemma4_tools, "google-gemma-4-31B-it", "4_tool_call")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, deepseek_v31_reasoning, "deepseek-ai-DeepSeek-V3.1",
                  "6_reasoning_multi_turn")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Parse, gemma4, "google-gemma-4-31B-it")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Parse, qwen3, "Qwen-Qwen3-0.6B")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace k25

BENCHMARK_MAIN();
