// k25-bench statistics: per-request records, percentiles, and the aggregate report (overall, per
// SLA class, per prompt-length class, per session turn kind).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace k25::loadgen {

// What happened to one request, times in milliseconds from the start of the run.
struct RequestRecord {
  int id = 0;
  std::map<std::string, std::string> tags;  // "sla" -> "gold", "length" -> "short", "turn" -> ...
  double start_ms = 0;                      // when it was first sent
  int http_status = 0;                      // 0: no response (connection error, timeout, cancel)
  bool ok = false;                          // 200 and the stream ended with [DONE], no error event
  bool cancelled = false;                   // cut off by --duration
  int rejected_429 = 0;                     // 429 answers seen (a retry may still have succeeded)
  std::string error;                        // empty when ok
  std::optional<double> ttft_ms;            // send -> first non-empty text chunk
  double e2e_ms = 0;                        // send -> end of the stream
  std::vector<double> itl_ms;               // gaps between consecutive text chunks
  int output_tokens = 0;                    // usage.completion_tokens, else text chunks counted
  bool output_tokens_from_usage = false;
  int prompt_tokens = 0;  // usage.prompt_tokens when given, else the planned count
  int planned_prompt_tokens = 0;

  // (e2e - ttft) / (output tokens - 1); absent with fewer than two tokens.
  std::optional<double> tpot_ms() const;
};

// Linear interpolation between closest ranks (NumPy's default); q in [0, 1]. NaN when empty.
double percentile(std::vector<double> values, double q);

struct Summary {
  size_t count = 0;
  double mean = 0, p50 = 0, p99 = 0, min = 0, max = 0;
};
Summary summarize(const std::vector<double>& values);
nlohmann::json to_json(const Summary& s);

// Service-level objectives for goodput; absent bounds do not apply.
struct Slo {
  std::optional<double> ttft_ms, tpot_ms;
  bool met_by(const RequestRecord& r) const;
};

// Latency and throughput of a set of requests.
struct GroupStats {
  size_t requests = 0, succeeded = 0, failed = 0, cancelled = 0, rejected_429 = 0;
  size_t goodput_requests = 0;
  long output_tokens = 0;
  Summary ttft, tpot, itl, e2e;
};
GroupStats group_stats(const std::vector<const RequestRecord*>& records, const Slo& slo);
nlohmann::json to_json(const GroupStats& g);

struct Report {
  double duration_s = 0;  // first send to last completion
  GroupStats overall;
  // tag name -> tag value -> stats, e.g. "sla" -> "gold".
  std::map<std::string, std::map<std::string, GroupStats>> by_tag;
  std::map<std::string, int> errors;  // error message -> count
  double req_per_s = 0, output_tok_per_s = 0, goodput_req_per_s = 0;
};
Report build_report(const std::vector<RequestRecord>& records, const Slo& slo);
nlohmann::json to_json(const Report& r);

}  // namespace k25::loadgen
