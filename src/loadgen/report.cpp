#include "loadgen/report.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace k25::loadgen {

using nlohmann::json;

namespace {

std::string triple(const Summary& s) {
  if (s.count == 0) return "-";
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%.1f/%.1f/%.1f", s.mean, s.p50, s.p99);
  return buffer;
}

std::string row(const std::string& name, const GroupStats& g) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%-18s %5zu %5zu %5zu  %-24s %-20s %-20s %-24s\n",
                name.c_str(), g.requests, g.succeeded, g.failed + g.cancelled,
                triple(g.ttft).c_str(), triple(g.tpot).c_str(), triple(g.itl).c_str(),
                triple(g.e2e).c_str());
  return buffer;
}

json record_json(const RequestRecord& r) {
  json j = {{"id", r.id},
            {"tags", r.tags},
            {"start_ms", r.start_ms},
            {"http_status", r.http_status},
            {"ok", r.ok},
            {"cancelled", r.cancelled},
            {"rejected_429", r.rejected_429},
            {"e2e_ms", r.e2e_ms},
            {"output_tokens", r.output_tokens},
            {"output_tokens_from_usage", r.output_tokens_from_usage},
            {"prompt_tokens", r.prompt_tokens},
            {"planned_prompt_tokens", r.planned_prompt_tokens},
            {"itl_ms", r.itl_ms}};
  j["ttft_ms"] = r.ttft_ms ? json(*r.ttft_ms) : json();
  j["tpot_ms"] = r.tpot_ms() ? json(*r.tpot_ms()) : json();
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

std::map<std::string, std::vector<const RequestRecord*>> by_tag(const RunResult& run,
                                                                const std::string& tag) {
  std::map<std::string, std::vector<const RequestRecord*>> groups;
  for (const RequestRecord& r : run.records) {
    if (auto it = r.tags.find(tag); it != r.tags.end()) groups[it->second].push_back(&r);
  }
  return groups;
}

Chart ttft_cdf(const RunResult& run, const std::string& tag) {
  Chart chart{"TTFT CDF by " + tag, "time to first token (ms)", "fraction of requests", {}};
  for (const auto& [value, members] : by_tag(run, tag)) {
    std::vector<double> ttft;
    for (const RequestRecord* r : members) {
      if (r->ok && r->ttft_ms) ttft.push_back(*r->ttft_ms);
    }
    chart.series.push_back({value + " (" + std::to_string(ttft.size()) + ")", cdf_points(ttft)});
  }
  return chart;
}

}  // namespace

std::string format_table(const RunDescription& d, const RunResult& run, const Report& report,
                         const std::optional<MemoryReport>& memory) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "k25-bench: %s against %s: %d planned, %zu sent, %zu ok, %zu failed, %zu "
                "cancelled, %d not started; %.2f s\n",
                d.workload.c_str(), d.url.c_str(), run.planned, run.records.size(),
                report.overall.succeeded, report.overall.failed, report.overall.cancelled,
                run.not_started, report.duration_s);
  out += line;
  std::snprintf(line, sizeof line,
                "throughput: %.3f req/s, %.2f output tok/s, goodput %.3f req/s (%zu requests "
                "within the SLOs)\n",
                report.req_per_s, report.output_tok_per_s, report.goodput_req_per_s,
                report.overall.goodput_requests);
  out += line;
  if (memory) {
    std::snprintf(line, sizeof line, "server peak RSS: %.1f MiB (VmHWM %.1f MiB)\n",
                  static_cast<double>(memory->peak_rss_bytes) / (1 << 20),
                  static_cast<double>(memory->vm_hwm_bytes) / (1 << 20));
    out += line;
  }
  out += std::string("prompt tokens: ") +
         (d.exact_tokens ? "exact (model tokenizer)" : "approximate (words x 4/3)") + "\n\n";
  std::snprintf(line, sizeof line, "%-18s %5s %5s %5s  %-24s %-20s %-20s %-24s\n", "class", "n",
                "ok", "err", "TTFT ms mean/p50/p99", "TPOT ms", "ITL ms", "E2E ms");
  out += line;
  out += row("overall", report.overall);
  for (const auto& [tag, values] : report.by_tag) {
    for (const auto& [value, g] : values) out += row(tag + "=" + value, g);
  }
  if (report.overall.rejected_429 > 0) {
    out += "\n429 answers: " + std::to_string(report.overall.rejected_429) + "\n";
  }
  if (!report.errors.empty()) {
    out += "\nerrors:\n";
    for (const auto& [message, n] : report.errors) {
      out += "  " + std::to_string(n) + " x " + message + "\n";
    }
  }
  return out;
}

json report_json(const RunDescription& d, const RunResult& run, const Report& report,
                 const std::optional<MemoryReport>& memory) {
  json records = json::array();
  for (const RequestRecord& r : run.records) records.push_back(record_json(r));
  json j = {{"tool", "k25-bench"},
            {"workload", d.workload},
            {"url", d.url},
            {"model", d.model},
            {"text_source", d.text_source},
            {"exact_prompt_tokens", d.exact_tokens},
            {"options", d.options},
            {"planned", run.planned},
            {"sent", run.records.size()},
            {"not_started", run.not_started},
            {"wall_s", run.wall_s},
            {"summary", to_json(report)},
            {"requests", records}};
  if (memory) {
    json samples = json::array();
    for (const auto& [t, bytes] : memory->samples) samples.push_back({t, bytes});
    j["server_memory"] = {{"peak_rss_bytes", memory->peak_rss_bytes},
                          {"vm_hwm_bytes", memory->vm_hwm_bytes},
                          {"rss_samples", samples}};
  }
  return j;
}

std::vector<Chart> report_charts(const RunResult& run) {
  std::vector<Chart> charts{ttft_cdf(run, "sla")};
  for (const char* tag : {"length", "turn"}) {
    if (!by_tag(run, tag).empty()) charts.push_back(ttft_cdf(run, tag));
  }
  Chart e2e{"End-to-end latency over the run", "request start (s)", "end-to-end latency (ms)", {}};
  for (const auto& [value, members] : by_tag(run, "sla")) {
    PlotSeries s{value, {}, true};
    for (const RequestRecord* r : members) {
      if (r->ok) s.points.emplace_back(r->start_ms / 1000.0, r->e2e_ms);
    }
    e2e.series.push_back(std::move(s));
  }
  charts.push_back(std::move(e2e));
  return charts;
}

}  // namespace k25::loadgen
