// k25-schedsim: a k25-bench workload replayed against the elastic scheduler alone, step times
// from a cost model (engine/scheduler_replay.h), printing each request's first token and the
// summary k25-bench gives for TTFT. For comparing ordering rules and scheduler settings on the
// same arrivals without the machine's noise; what it prints is a model, not a measurement.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>

#include "core/error.h"
#include "engine/scheduler_replay.h"
#include "flash/request_hints.h"
#include "loadgen/stats.h"
#include "loadgen/workload.h"

namespace {

struct Args {
  std::string workload = "bimodal";
  std::string sla_mix = "20/30/50";
  double scale = 0.25;
  int requests = 32;
  uint64_t seed = 1;
  double rate = 0;
  int max_tokens = 32;
  bool quiet = false;
  bool trace = false;
};

// Each change in which requests a step prefills, with the step's start.
void print_trace(const k25::ReplayResult& r) {
  double t = 0;
  const std::vector<int>* last = nullptr;
  for (size_t i = 0; i < r.prefilled.size(); ++i) {
    if (!last || r.prefilled[i] != *last) {
      std::printf("%9.2f s  step %4zu  prefill:", t, i + 1);
      for (int id : r.prefilled[i]) std::printf(" %d", id);
      std::printf("\n");
      last = &r.prefilled[i];
    }
    t += r.step_ms[i] / 1000.0;
  }
}

void print_summary(const char* name, const std::vector<double>& ttft_s) {
  if (ttft_s.empty()) return;
  const k25::loadgen::Summary s = k25::loadgen::summarize(ttft_s);
  std::printf("%-14s n=%-3zu mean %8.2f s  p50 %8.2f s  p99 %8.2f s  max %8.2f s\n", name, s.count,
              s.mean, s.p50, s.p99, s.max);
}

int run(const Args& a, k25::ReplayOptions o) {
  k25::loadgen::WorkloadOptions w;
  w.kind = k25::loadgen::parse_workload_kind(a.workload);
  w.scale = a.scale;
  w.requests = a.requests;
  w.sla_mix = k25::loadgen::SlaMix::parse(a.sla_mix);
  w.seed = a.seed;
  w.rate = a.rate;
  const std::vector<k25::loadgen::PlannedRequest> plan = k25::loadgen::plan_requests(w);
  std::vector<k25::ReplayRequest> requests;
  for (const auto& p : plan) {
    requests.push_back({p.arrival_s, k25::sla_priority(*k25::parse_latency_sla(p.sla)),
                        p.prompt_tokens, a.max_tokens});
  }
  if (a.rate > 0) o.concurrency = 0;
  const k25::ReplayResult r = k25::replay_schedule(requests, o);
  if (a.trace) print_trace(r);
  std::map<std::string, std::vector<double>> by;
  double last = 0;
  if (!a.quiet)
    std::printf("%4s %-6s %-7s %7s %9s %9s %9s\n", "id", "length", "sla", "tokens", "sent_s",
                "ttft_s", "done_s");
  for (size_t i = 0; i < plan.size(); ++i) {
    const k25::ReplayOutcome& out = r.requests[i];
    if (!a.quiet) {
      std::printf("%4d %-6s %-7s %7d %9.2f %9.2f %9.2f\n", plan[i].id, plan[i].length_class.c_str(),
                  plan[i].sla.c_str(), plan[i].prompt_tokens, out.sent_s, out.ttft_s(),
                  out.finished_s);
    }
    by["all"].push_back(out.ttft_s());
    by[plan[i].length_class].push_back(out.ttft_s());
    by[plan[i].sla].push_back(out.ttft_s());
    last = std::max(last, out.finished_s);
  }
  std::printf("steps %d, last request done at %.2f s (%.3f req/s)\n", r.steps, last,
              plan.size() / last);
  for (const char* name : {"all", "short", "long", "gold", "silver", "bronze"}) {
    print_summary((std::string("ttft ") + name).c_str(), by[name]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "k25-schedsim: a workload replayed against the elastic scheduler, step times modelled"};
  Args a;
  k25::ReplayOptions o;
  o.concurrency = 24;
  o.scheduler.position_cost = -1;
  app.add_option("--workload", a.workload, "bimodal or short")->capture_default_str();
  app.add_option("--scale", a.scale, "prompt length factor")->capture_default_str();
  app.add_option("--requests", a.requests, "requests")->capture_default_str();
  app.add_option("--sla-mix", a.sla_mix, "GOLD/SILVER/BRONZE shares")->capture_default_str();
  app.add_option("--seed", a.seed, "seed of the workload draws")->capture_default_str();
  app.add_option("--concurrency", o.concurrency, "closed loop: requests in flight")
      ->capture_default_str();
  app.add_option("--rate", a.rate,
                 "open loop: Poisson arrivals per second (overrides concurrency)");
  app.add_option("--max-tokens", a.max_tokens, "tokens generated per request")
      ->capture_default_str();
  app.add_option("--fixed-ms", o.cost.fixed_ms, "step cost: fixed part")->capture_default_str();
  app.add_option("--per-token-ms", o.cost.per_token_ms, "step cost: per token")
      ->capture_default_str();
  app.add_option("--per-position-ms", o.cost.per_position_ms,
                 "step cost: per position of context of each token")
      ->capture_default_str();
  app.add_option("--target-step-ms", o.target_step_ms, "engine.target_step_ms (0: off)")
      ->capture_default_str();
  app.add_option("--step-token-budget", o.scheduler.step_token_budget, "configured step budget")
      ->capture_default_str();
  app.add_option("--position-cost", o.scheduler.position_cost,
                 "configured position cost (-1: the cost model's per-position / per-token)")
      ->capture_default_str();
  app.add_option("--micro-task-tokens", o.scheduler.micro_task_tokens, "prefill chunk")
      ->capture_default_str();
  app.add_option("--aging", o.scheduler.aging_per_second, "priority points per second waited")
      ->capture_default_str();
  app.add_option("--max-batch-size", o.scheduler.max_batch_size, "batch slots")
      ->capture_default_str();
  app.add_flag("--quiet", a.quiet, "the summary only");
  app.add_flag("--trace", a.trace, "print which requests each step prefills, as it changes");
  CLI11_PARSE(app, argc, argv);
  if (o.scheduler.position_cost < 0) {
    o.scheduler.position_cost = o.cost.per_position_ms / o.cost.per_token_ms;
  }
  try {
    return run(a, o);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
