#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace k25::loadgen {

using nlohmann::json;

std::optional<double> RequestRecord::tpot_ms() const {
  if (!ttft_ms || output_tokens < 2) return std::nullopt;
  return (e2e_ms - *ttft_ms) / (output_tokens - 1);
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.p50 = percentile(values, 0.50);
  s.p99 = percentile(values, 0.99);
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  s.min = *lo;
  s.max = *hi;
  return s;
}

json to_json(const Summary& s) {
  if (s.count == 0) return {{"count", 0}};
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50},
          {"p99", s.p99},     {"min", s.min},   {"max", s.max}};
}

bool Slo::met_by(const RequestRecord& r) const {
  if (!r.ok) return false;
  if (ttft_ms && (!r.ttft_ms || *r.ttft_ms > *ttft_ms)) return false;
  // A one-token answer has no TPOT; it cannot miss a TPOT bound.
  if (tpot_ms && r.tpot_ms() && *r.tpot_ms() > *tpot_ms) return false;
  return true;
}

GroupStats group_stats(const std::vector<const RequestRecord*>& records, const Slo& slo) {
  GroupStats g;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const RequestRecord* r : records) {
    ++g.requests;
    g.rejected_429 += r->rejected_429;
    if (r->cancelled) {
      ++g.cancelled;
      continue;
    }
    if (!r->ok) {
      ++g.failed;
      continue;
    }
    ++g.succeeded;
    if (slo.met_by(*r)) ++g.goodput_requests;
    g.output_tokens += r->output_tokens;
    if (r->ttft_ms) ttft.push_back(*r->ttft_ms);
    if (auto t = r->tpot_ms()) tpot.push_back(*t);
    itl.insert(itl.end(), r->itl_ms.begin(), r->itl_ms.end());
    e2e.push_back(r->e2e_ms);
  }
  g.ttft = summarize(ttft);
  g.tpot = summarize(tpot);
  g.itl = summarize(itl);
  g.e2e = summarize(e2e);
  return g;
}

json to_json(const GroupStats& g) {
  return {{"requests", g.requests},
          {"succeeded", g.succeeded},
          {"failed", g.failed},
          {"cancelled", g.cancelled},
          {"rejected_429", g.rejected_429},
          {"goodput_requests", g.goodput_requests},
          {"output_tokens", g.output_tokens},
          {"ttft_ms", to_json(g.ttft)},
          {"tpot_ms", to_json(g.tpot)},
          {"itl_ms", to_json(g.itl)},
          {"e2e_ms", to_json(g.e2e)}};
}

Report build_report(const std::vector<RequestRecord>& records, const Slo& slo) {
  Report report;
  std::vector<const RequestRecord*> all;
  std::map<std::string, std::map<std::string, std::vector<const RequestRecord*>>> groups;
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (const RequestRecord& r : records) {
    all.push_back(&r);
    for (const auto& [name, value] : r.tags) groups[name][value].push_back(&r);
    first = std::min(first, r.start_ms);
    last = std::max(last, r.start_ms + r.e2e_ms);
    if (!r.ok && !r.cancelled) ++report.errors[r.error.empty() ? "unknown error" : r.error];
  }
  report.overall = group_stats(all, slo);
  for (const auto& [name, values] : groups) {
    for (const auto& [value, members] : values) {
      report.by_tag[name][value] = group_stats(members, slo);
    }
  }
  report.duration_s = records.empty() ? 0 : (last - first) / 1000.0;
  if (report.duration_s > 0) {
    report.req_per_s = static_cast<double>(report.overall.succeeded) / report.duration_s;
    report.output_tok_per_s = static_cast<double>(report.overall.output_tokens) / report.duration_s;
    report.goodput_req_per_s =
        static_cast<double>(report.overall.goodput_requests) / report.duration_s;
  }
  return report;
}

json to_json(const Report& r) {
  json by_tag = json::object();
  for (const auto& [name, values] : r.by_tag) {
    for (const auto& [value, g] : values) by_tag[name][value] = to_json(g);
  }
  return {{"duration_s", r.duration_s},
          {"req_per_s", r.req_per_s},
          {"output_tok_per_s", r.output_tok_per_s},
          {"goodput_req_per_s", r.goodput_req_per_s},
          {"overall", to_json(r.overall)},
          {"by_class", by_tag},
          {"errors", r.errors}};
}

}  // namespace k25::loadgen
