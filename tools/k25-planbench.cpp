// k25-planbench: prefill and decode speed of the forward pass under the compute plans Flash
// chooses (Level 1 rule, Level 2 per calibrated domain) against the full model, in one run, with
// the share of compute each plan skips, so the speedup can be set against it (docs/flash.md).
// Plans and the full model alternate within every repetition and the median is reported, so
// slow drifts of the machine hit every row alike. --mixed compares instead a batch of sequences
// under distinct plans, in one forward call per step, with the same batch under one plan.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"
#include "engine/batched_bench.h"
#include "flash/flash_planner.h"
#include "kernels/kernel_table.h"

namespace {

using json = nlohmann::json;

struct Row {
  std::string name;
  int level = 0;
  std::shared_ptr<const k25::ComputePlan> plan;  // null: the full model
  double saved_prefill = 0, saved_decode = 0;    // share of compute skipped
  std::vector<double> prefill_tps, decode_tps;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The plan Flash picks for a request of n_prompt tokens wanting n_generate, with a domain hint
// (empty: none) and the rule switched on or off.
k25::PlanDecision decide(const k25::Model& model, const std::string& metadata_dir,
                         const std::string& text, int n_prompt, int n_generate,
                         const std::string& domain, bool rule) {
  k25::FlashOptions options;
  options.metadata_dir = metadata_dir;
  options.rule_mode = rule ? "on" : "off";
  k25::FlashPlanner planner(model.config(), "", options);
  k25::FingerprintInput in;
  in.prompt_text = text;
  in.prompt_tokens = n_prompt;
  in.max_tokens = n_generate;
  if (!domain.empty()) {
    in.domain_hint = domain;
    in.domain_given = true;
  }
  return planner.plan(in, false).decision;
}

// Issue 16's mixed batches: n_parallel sequences decoding under n_parallel different plans (each
// skips the FFN of a different block, so each saves the same compute), in one forward call per
// step or in one call per plan (how the engine ran them before), against the same batch under
// one plan. Printed as a table of decode tok/s (medians over `reps`, rows alternating).
int run_mixed(k25::Model& model, int n_prompt, int n_generate, int n_parallel, int ubatch, int reps,
              k25::ThreadPool& pool) {
  const k25::ModelConfig& c = model.config();
  std::vector<std::unique_ptr<k25::ComputePlan>> owned;
  std::vector<const k25::ComputePlan*> one, distinct;
  for (int i = 0; i < n_parallel; ++i) {
    owned.push_back(
        std::make_unique<k25::ComputePlan>(k25::ComputePlan::full(c.n_layers, c.n_heads)));
    owned.back()->set_ffn(c.n_layers - 1 - i % c.n_layers, false);
    distinct.push_back(owned.back().get());
    one.push_back(owned.front().get());
  }
  struct MixRow {
    const char* name;
    k25::BatchedBenchCase c;
    std::vector<double> decode_tps;
  };
  std::vector<MixRow> rows = {
      {"one plan", {n_prompt, n_generate, n_parallel}, {}},
      {"distinct plans, one call", {n_prompt, n_generate, n_parallel}, {}},
      {"distinct plans, a call per plan", {n_prompt, n_generate, n_parallel}, {}}};
  rows[0].c.sequence_plans = one;
  rows[1].c.sequence_plans = distinct;
  rows[2].c.sequence_plans = distinct;
  rows[2].c.call_per_plan = true;
  k25::run_batched_bench(model, rows[0].c, pool, ubatch);  // untimed: page faults, cold caches
  for (int r = 0; r < reps; ++r) {
    for (MixRow& row : rows) {
      row.decode_tps.push_back(
          k25::run_batched_bench(model, row.c, pool, ubatch).decode_tokens_per_s());
      std::fprintf(stderr, "rep %d/%d %s: decode %.1f tok/s\n", r + 1, reps, row.name,
                   row.decode_tps.back());
    }
  }
  const double base = median(rows[0].decode_tps);
  std::printf("isa %s, %d sequences, %d prompt + %d decode tokens each\n", k25::kernels().isa,
              n_parallel, n_prompt, n_generate);
  std::printf("| batch | decode tok/s | vs one plan |\n|---|---|---|\n");
  for (const MixRow& row : rows) {
    std::printf("| %s | %.1f | %.3f |\n", row.name, median(row.decode_tps),
                median(row.decode_tps) / base);
  }
  return 0;
}

std::vector<std::string> domains_of(const k25::Model& model, const std::string& metadata_dir) {
  if (metadata_dir.empty()) return {};
  k25::FlashOptions options;
  options.metadata_dir = metadata_dir;
  k25::FlashPlanner planner(model.config(), "", options);
  return planner.metadata()->domains();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"k25-planbench: forward-pass speed under Flash compute plans vs the full model"};
  std::string model_path, metadata_dir, prompt_file;
  int n_prompt = 256, n_generate = 64, n_parallel = 1, ubatch = 128, threads = 2, reps = 3;
  bool json_out = false, mixed = false;
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_flag("--mixed", mixed,
               "compare a batch of --npl sequences under distinct plans with one plan (issue 16)");
  app.add_option("--metadata", metadata_dir, "k25_metadata directory (Level 2 rows per domain)");
  app.add_option("--prompt-file", prompt_file, "text whose fingerprint the gates see");
  app.add_option("--npp", n_prompt, "prompt tokens")->capture_default_str();
  app.add_option("--ntg", n_generate, "generated tokens")->capture_default_str();
  app.add_option("--npl", n_parallel, "parallel sequences")->capture_default_str();
  app.add_option("--ubatch", ubatch, "tokens per prefill forward call")->capture_default_str();
  app.add_option("-t,--threads", threads)->capture_default_str();
  app.add_option("--reps", reps, "repetitions (median reported)")->capture_default_str();
  app.add_flag("--json", json_out, "print one JSON array");
  CLI11_PARSE(app, argc, argv);
  try {
    if (threads < 1 || reps < 1) k25::fail("--threads and --reps must be at least 1");
    auto model = k25::Model::load(model_path);
    if (mixed) {
      k25::ThreadPool pool(threads);
      return run_mixed(*model, n_prompt, n_generate, n_parallel, ubatch, reps, pool);
    }
    const std::string text = prompt_file.empty()
                                 ? std::string(
                                       "Once upon a time, there was a "
                                       "little girl named Lily.")
                                 : k25::read_text_file(prompt_file, "--prompt-file");
    std::vector<Row> rows;
    rows.push_back({"full", 0, nullptr, 0, 0, {}, {}});
    const auto add = [&](const std::string& name, const k25::PlanDecision& d) {
      if (!d.plan) {
        std::fprintf(stderr, "%s: Flash chose the full model; row left out\n", name.c_str());
        return;
      }
      const auto& c = model->config();
      // Attention work is counted at the mean context of each phase.
      const double saved_prefill =
          k25::compute_saved(*d.plan, k25::compute_costs(c, std::max(1, n_prompt / 2)));
      const double saved_decode =
          k25::compute_saved(*d.plan, k25::compute_costs(c, n_prompt + n_generate / 2));
      rows.push_back({name, d.level, d.plan, saved_prefill, saved_decode, {}, {}});
    };
    add("level1-rule", decide(*model, "", text, n_prompt, n_generate, "", true));
    for (const std::string& domain : domains_of(*model, metadata_dir)) {
      add("level2-" + domain,
          decide(*model, metadata_dir, text, n_prompt, n_generate, domain, false));
    }
    k25::ThreadPool pool(threads);
    // Untimed: the first pass pays for page faults and cold caches.
    k25::run_batched_bench(*model, {n_prompt, n_generate, n_parallel}, pool, ubatch);
    for (int r = 0; r < reps; ++r) {
      for (Row& row : rows) {
        const k25::BatchedBenchResult b = k25::run_batched_bench(
            *model, {n_prompt, n_generate, n_parallel}, pool, ubatch, row.plan.get());
        row.prefill_tps.push_back(b.prefill_tokens_per_s());
        row.decode_tps.push_back(b.decode_tokens_per_s());
        std::fprintf(stderr, "rep %d/%d %s: prefill %.1f tok/s, decode %.1f tok/s\n", r + 1, reps,
                     row.name.c_str(), b.prefill_tokens_per_s(), b.decode_tokens_per_s());
      }
    }
    const double full_pp = median(rows[0].prefill_tps), full_tg = median(rows[0].decode_tps);
    json out = json::array();
    if (!json_out) {
      std::printf(
          "| plan | level | skipped | saved pp | saved tg | pp tok/s | tg tok/s | pp speedup "
          "| tg speedup | ideal pp | ideal tg |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for (const Row& row : rows) {
      const double pp = median(row.prefill_tps), tg = median(row.decode_tps);
      const std::string skipped = row.plan ? row.plan->describe() : "-";
      // If time fell exactly with the compute skipped, speed would rise by 1 / (1 - saved).
      const double ideal_pp = 1.0 / (1.0 - row.saved_prefill);
      const double ideal_tg = 1.0 / (1.0 - row.saved_decode);
      if (json_out) {
        out.push_back({{"plan", row.name},
                       {"level", row.level},
                       {"skipped", skipped},
                       {"compute_saved_prefill", row.saved_prefill},
                       {"compute_saved_decode", row.saved_decode},
                       {"prefill_tokens_per_s", pp},
                       {"decode_tokens_per_s", tg},
                       {"prefill_speedup", pp / full_pp},
                       {"decode_speedup", tg / full_tg},
                       {"ideal_prefill_speedup", ideal_pp},
                       {"ideal_decode_speedup", ideal_tg}});
      } else {
        std::printf(
            "| %s | %d | %s | %.1f%% | %.1f%% | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f |\n",
            row.name.c_str(), row.level, skipped.c_str(), 100 * row.saved_prefill,
            100 * row.saved_decode, pp, tg, pp / full_pp, tg / full_tg, ideal_pp, ideal_tg);
      }
    }
    if (json_out) std::cout << out.dump() << '\n';
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
