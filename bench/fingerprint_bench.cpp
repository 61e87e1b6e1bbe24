// R-FP3: the cost of the Flash decision on the request path — header parsing, the fingerprint
// (SimHash + features + domain match against 3 x 64 signatures) and the Level 1/2 plan choice
// for a 40-block model — for prompts of 256 to 32k characters. Reports P50/P99 per call in µs
// (counters p50_us, p99_us); the target is P99 < 1 ms.
//   build/bin/fingerprint_bench
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "flash/domain_map.h"
#include "flash/flash_planner.h"
#include "flash/gate.h"
#include "flash/simhash.h"
#include "server/flash_headers.h"

namespace k25 {
namespace {

ModelConfig forty_blocks() {
  ModelConfig c;
  c.n_vocab = 152064;
  c.dim = 5120;
  c.n_layers = 40;
  c.n_heads = 40;
  c.n_kv_heads = 40;
  c.head_dim = 128;
  c.ffn_dim = 13696;
  c.context_length = 32768;
  return c;
}

std::string prompt_of(size_t chars) {
  const std::string base =
      "Under Article 47 of the Labour Contract Law, compensation is one month's wage per year "
      "of service. 根据劳动合同法第四十七条，经济补偿按劳动者在本单位工作的年限支付。 ";
  std::string s;
  while (s.size() < chars) s += base;
  s.resize(chars);
  return s;
}

// A k25_metadata directory with three domains, 64 signatures each.
std::string make_metadata(const ModelConfig& m) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("k25_fingerprint_bench_" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  std::vector<DomainEntry> entries;
  uint64_t seed = 1;
  for (const char* name : {"default", "legal", "finance"}) {
    GateMlp g = GateMlp::zero(kGateFeatures, m.n_layers, m.n_heads);
    for (size_t i = 0; i < g.w2.size(); ++i) g.w2[i] = (i % 7) * 0.1f - 0.3f;
    save_gate_file(g, dir + "/" + name + "_gate.bin");
    DomainEntry e{name, std::string(name) + "_gate.bin", 0.35, {}};
    for (int i = 0; i < 64; ++i) e.signatures.push_back(simhash64(std::to_string(seed++) + name));
    entries.push_back(e);
  }
  std::ofstream(dir + "/domain_map.json") << domain_map_json(entries);
  return dir;
}

void BM_FlashDecision(benchmark::State& state) {
  static const ModelConfig model = forty_blocks();
  static const std::string dir = make_metadata(model);
  FlashOptions options;
  options.metadata_dir = dir;
  static FlashPlanner planner(model, "", options);
  const std::string prompt = prompt_of(static_cast<size_t>(state.range(0)));
  const bool with_hint = state.range(1) != 0;
  const std::vector<std::pair<std::string, std::string>> headers = {{"x-prompt-length", "2456"},
                                                                    {"x-response-length", "100"},
                                                                    {"x-latency-sla", "gold"},
                                                                    {"x-domain-hint", "legal"}};
  std::vector<double> us;
  us.reserve(1 << 16);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    FlashHints hints =
        parse_flash_headers([&](std::string_view name) -> std::optional<std::string_view> {
          for (const auto& [k, v] : headers) {
            if (k == name && (with_hint || k != "x-domain-hint")) return std::string_view(v);
          }
          return std::nullopt;
        });
    FingerprintInput in;
    in.prompt_text = prompt;
    in.prompt_tokens = static_cast<int>(prompt.size() / 4);
    in.max_tokens = 100;
    in.response_length_hint = hints.response_length;
    in.priority = sla_priority(hints.sla);
    in.domain_hint = hints.domain;
    in.domain_given = hints.domain_given;
    FlashResult r = planner.plan(in, false);
    benchmark::DoNotOptimize(r);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters["max_us"] = us.back();
}
BENCHMARK(BM_FlashDecision)
    ->ArgsProduct({{256, 4096, 32768}, {0, 1}})
    ->ArgNames({"chars", "hint"})
    ->Unit(benchmark::kMicrosecond);

void BM_SimHash(benchmark::State& state) {
  const std::string prompt = prompt_of(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(simhash64(prompt));
}
BENCHMARK(BM_SimHash)->Arg(256)->Arg(32768)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace k25

BENCHMARK_MAIN();
