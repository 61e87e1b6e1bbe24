// k25-bench output: the human table, the JSON document and the SVG charts of one run.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "loadgen/svg_plot.h"

namespace k25::loadgen {

struct MemoryReport {
  long long peak_rss_bytes = 0, vm_hwm_bytes = 0;
  std::vector<std::pair<double, long long>> samples;  // (s, VmRSS bytes)
};

struct RunDescription {
  std::string workload, url, model, text_source;
  bool exact_tokens = false;  // prompts counted with the model's tokenizer
  nlohmann::json options;     // the flags as given
};

std::string format_table(const RunDescription& d, const RunResult& run, const Report& report,
                         const std::optional<MemoryReport>& memory);

nlohmann::json report_json(const RunDescription& d, const RunResult& run, const Report& report,
                           const std::optional<MemoryReport>& memory);

// TTFT CDF per SLA class, per length class or turn kind when the workload has them, and
// end-to-end latency over the run's time, per SLA class.
std::vector<Chart> report_charts(const RunResult& run);

}  // namespace k25::loadgen
