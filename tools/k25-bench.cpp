// k25-bench: an OpenAI-API load generator (POST /v1/completions, streamed) that drives k25-server
// and llama.cpp's llama-server alike and reports throughput, TTFT / TPOT / ITL / end-to-end
// latency overall and per class, goodput and the server's peak memory.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"
#include "formats/gguf.h"
#include "loadgen/prompt_text.h"
#include "loadgen/report.h"
#include "loadgen/rss_sampler.h"
#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "loadgen/svg_plot.h"
#include "loadgen/workload.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace k25::loadgen;
using nlohmann::json;

struct Args {
  RunOptions run;
  std::string workload = "short", sla_mix, tokenizer_model, text_file, json_out, plot_out;
  double scale = 1;
  int requests = 32, sessions = 4, turns = 3, history_tokens = 1024, turn_tokens = 32;
  double rate = 0;
  int server_pid = 0;
  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  bool no_ignore_eos = false, no_progress = false;
};

void write_file(const std::string& path, const std::string& data, const char* what) {
  std::ofstream out(path, std::ios::binary);
  out << data;
  if (!out) k25::fail(what, " ", path, ": cannot write file");
}

json options_json(const Args& a, const WorkloadOptions& w) {
  json j = {{"workload", a.workload},
            {"scale", a.scale},
            {"concurrency", a.run.concurrency},
            {"rate", a.rate},
            {"max_tokens", a.run.max_tokens},
            {"temperature", a.run.temperature},
            {"ignore_eos", a.run.ignore_eos},
            {"seed", a.run.seed},
            {"think_time_s", a.run.think_time_s},
            {"timeout_s", a.run.timeout_s},
            {"retry_429", a.run.retry_429},
            {"cancel_at_deadline", a.run.cancel_at_deadline},
            {"sla_mix", a.sla_mix.empty() ? json() : json(a.sla_mix)}};
  j["duration_s"] = a.run.duration_s ? json(*a.run.duration_s) : json();
  j["slo_ttft_ms"] = a.slo_ttft_ms ? json(*a.slo_ttft_ms) : json();
  j["slo_tpot_ms"] = a.slo_tpot_ms ? json(*a.slo_tpot_ms) : json();
  if (w.kind == WorkloadKind::Sessions) {
    j["sessions"] = w.sessions;
    j["turns"] = w.turns;
    j["history_tokens"] = w.history_tokens;
    j["turn_tokens"] = w.turn_tokens;
  } else {
    j["requests"] = w.requests;
  }
  return j;
}

int run(Args& a, bool concurrency_given) {
  if (a.rate < 0) k25::fail("--rate must be positive, got ", a.rate);
  if (!concurrency_given) a.run.concurrency = a.rate > 0 ? 0 : 1;
  if (a.run.concurrency < 0) k25::fail("--concurrency must be >= 0, got ", a.run.concurrency);
  if (a.run.max_tokens < 1) k25::fail("--max-tokens must be at least 1, got ", a.run.max_tokens);
  if (!(a.run.timeout_s > 0)) k25::fail("--timeout-s must be positive");
  a.run.ignore_eos = !a.no_ignore_eos;
  a.run.progress = !a.no_progress;

  WorkloadOptions w;
  w.kind = parse_workload_kind(a.workload);
  w.scale = a.scale;
  w.requests = a.requests;
  w.seed = a.run.seed;
  w.rate = a.rate;
  w.sessions = a.sessions;
  w.turns = a.turns;
  w.history_tokens = a.history_tokens;
  w.turn_tokens = a.turn_tokens;
  if (!a.sla_mix.empty()) w.sla_mix = SlaMix::parse(a.sla_mix);
  Slo slo{a.slo_ttft_ms, a.slo_tpot_ms};

  std::unique_ptr<k25::Tokenizer> tokenizer;
  if (!a.tokenizer_model.empty()) {
    tokenizer = a.tokenizer_model.ends_with(".json")
                    ? k25::Tokenizer::from_hf_json(a.tokenizer_model)
                    : k25::Tokenizer::from_gguf(*k25::GgufFile::open(a.tokenizer_model));
  }
  const std::string text_source = a.text_file.empty() ? "generated words" : a.text_file;
  PromptBuilder builder(a.text_file.empty() ? generated_words(20000, a.run.seed)
                                            : k25::read_text_file(a.text_file, "--text"),
                        tokenizer.get());
  if (!builder.exact()) {
    std::fprintf(stderr,
                 "k25-bench: no --tokenizer-model: prompt lengths are approximate (words x 4/3)\n");
  }

  const auto prep_start = std::chrono::steady_clock::now();
  std::vector<PreparedRequest> requests;
  std::vector<PreparedSession> sessions;
  if (w.kind == WorkloadKind::Sessions) {
    std::vector<PlannedSession> plan = plan_sessions(w);
    if (a.sla_mix.empty()) {
      for (PlannedSession& s : plan) s.sla = "default";
    }
    sessions = prepare_sessions(plan, builder);
  } else {
    std::vector<PlannedRequest> plan = plan_requests(w);
    if (a.sla_mix.empty()) {
      for (PlannedRequest& r : plan) r.sla = "default";
    }
    requests = prepare_requests(plan, builder);
  }
  std::fprintf(stderr, "k25-bench: prompts ready in %.1f s; %s workload against %s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - prep_start).count(),
               a.workload.c_str(), a.run.url.c_str());

  std::unique_ptr<RssSampler> sampler;
  if (a.server_pid > 0) sampler = std::make_unique<RssSampler>(a.server_pid);
  RunResult result = w.kind == WorkloadKind::Sessions ? run_sessions(a.run, sessions)
                                                      : run_requests(a.run, requests);
  std::optional<MemoryReport> memory;
  if (sampler) {
    sampler->stop();
    memory = MemoryReport{sampler->peak_rss_bytes(), sampler->hwm_bytes(), sampler->samples()};
  }

  const Report report = build_report(result.records, slo);
  const RunDescription description{a.workload,  a.run.url,       a.run.model,
                                   text_source, builder.exact(), options_json(a, w)};
  std::cout << format_table(description, result, report, memory) << std::flush;
  if (!a.json_out.empty()) {
    write_file(a.json_out, report_json(description, result, report, memory).dump(2) + "\n",
               "--json");
  }
  if (!a.plot_out.empty()) write_file(a.plot_out, render_svg(report_charts(result)), "--plot");
  if (report.overall.failed > 0 && report.overall.succeeded == 0) {
    std::fprintf(stderr, "k25-bench: no request succeeded\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "k25-bench: load generator for OpenAI-compatible completion servers (k25-server, "
      "llama-server)"};
  Args a;
  app.add_option("--url", a.run.url, "server base URL")->capture_default_str();
  app.add_option("--model", a.run.model, "sent as \"model\" (omitted when empty)");
  app.add_option("--api-key", a.run.api_key, "sent as Authorization: Bearer KEY");
  app.add_option("--workload", a.workload, "bimodal | short | sessions")->capture_default_str();
  app.add_option("--scale", a.scale, "multiplies prompt (and session history) lengths")
      ->capture_default_str();
  app.add_option("--requests", a.requests, "requests to send (bimodal, short)")
      ->capture_default_str();
  auto* concurrency = app.add_option(
      "--concurrency", a.run.concurrency,
      "requests (sessions) in flight at most; 0 = unlimited (default 1, unlimited with --rate)");
  app.add_option("--rate", a.rate, "Poisson arrivals per second (requests, or sessions)");
  app.add_option("--max-tokens", a.run.max_tokens, "output tokens per request")
      ->capture_default_str();
  app.add_flag("--no-ignore-eos", a.no_ignore_eos, "do not send \"ignore_eos\": true");
  app.add_option("--temperature", a.run.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--sla-mix", a.sla_mix,
                 "GOLD/SILVER/BRONZE shares, e.g. 20/30/50, sent as x-latency-sla (default: no "
                 "header)");
  app.add_option("--duration", a.run.duration_s, "stop issuing requests after S seconds");
  app.add_flag("--cancel-at-deadline", a.run.cancel_at_deadline,
               "with --duration: also cut off the requests still running");
  app.add_option("--seed", a.run.seed, "seed of the workload draws")->capture_default_str();
  app.add_option("--timeout-s", a.run.timeout_s, "per-request timeout (whole exchange)")
      ->capture_default_str();
  app.add_flag("--retry-429", a.run.retry_429, "retry a 429 once after its Retry-After");
  app.add_option("--slo-ttft-ms", a.slo_ttft_ms, "goodput: TTFT bound");
  app.add_option("--slo-tpot-ms", a.slo_tpot_ms, "goodput: TPOT bound");
  app.add_option("--server-pid", a.server_pid, "sample /proc/PID/status (VmRSS, VmHWM)");
  app.add_option("--tokenizer-model", a.tokenizer_model,
                 "GGUF (or tokenizer.json) whose tokenizer sizes the prompts exactly");
  app.add_option("--text", a.text_file, "text to cut prompts from (default: generated words)");
  app.add_option("--sessions", a.sessions, "sessions workload: conversations")
      ->capture_default_str();
  app.add_option("--turns", a.turns, "sessions workload: requests per conversation")
      ->capture_default_str();
  app.add_option("--history-tokens", a.history_tokens,
                 "sessions workload: history before the first turn (±25%, times --scale)")
      ->capture_default_str();
  app.add_option("--turn-tokens", a.turn_tokens, "sessions workload: tokens of each user line")
      ->capture_default_str();
  app.add_option("--think-time-s", a.run.think_time_s,
                 "sessions workload: pause before each follow-up turn, slot given to another "
                 "session meanwhile (0: a session keeps its slot)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--json", a.json_out, "write the JSON report here");
  app.add_option("--plot", a.plot_out, "write an SVG plot here");
  app.add_flag("--no-progress", a.no_progress, "no progress output on stderr");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);  // a server closing mid-request is an error to report, not a crash
  try {
    return run(a, concurrency->count() > 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
