#include "loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace k25::loadgen {

WorkloadKind parse_workload_kind(const std::string& name) {
  if (name == "bimodal") return WorkloadKind::Bimodal;
  if (name == "short") return WorkloadKind::Short;
  if (name == "sessions") return WorkloadKind::Sessions;
  fail("--workload: expected bimodal, short or sessions, got '", name, "'");
}

std::string workload_kind_name(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::Bimodal:
      return "bimodal";
    case WorkloadKind::Short:
      return "short";
    case WorkloadKind::Sessions:
      return "sessions";
  }
  return "?";
}

SlaMix SlaMix::parse(const std::string& text) {
  std::vector<double> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, '/')) {
    size_t used = 0;
    double value = -1;
    try {
      value = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || !(value >= 0) || !std::isfinite(value)) {
      fail("--sla-mix: '", text, "' is not GOLD/SILVER/BRONZE (three non-negative numbers)");
    }
    parts.push_back(value);
  }
  if (parts.size() != 3) {
    fail("--sla-mix: '", text, "' is not GOLD/SILVER/BRONZE (three non-negative numbers)");
  }
  const double total = parts[0] + parts[1] + parts[2];
  if (total <= 0) fail("--sla-mix: '", text, "' has no positive share");
  return {parts[0] / total, parts[1] / total, parts[2] / total};
}

std::string SlaMix::pick(std::mt19937_64& rng) const {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  if (u < gold) return "gold";
  if (u < gold + silver) return "silver";
  return "bronze";
}

std::vector<LengthClass> length_classes(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::Bimodal:
      return {{"short", 0.57, 210, 30}, {"long", 0.43, 12400, 1800}};
    case WorkloadKind::Short:
      return {{"short", 1.0, 128, 32}};
    case WorkloadKind::Sessions:
      return {};
  }
  return {};
}

int scaled_length(const LengthClass& c, double scale, std::mt19937_64& rng) {
  const int raw = std::uniform_int_distribution<int>(c.mean - c.spread, c.mean + c.spread)(rng);
  return std::max(2, static_cast<int>(std::lround(raw * scale)));
}

std::vector<double> poisson_arrivals(int n, double rate, std::mt19937_64& rng) {
  std::vector<double> times;
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    times.push_back(t);
  }
  return times;
}

std::vector<PlannedRequest> plan_requests(const WorkloadOptions& o) {
  if (o.kind == WorkloadKind::Sessions) fail("plan_requests: the sessions workload plans sessions");
  if (o.requests < 1) fail("--requests must be at least 1, got ", o.requests);
  if (!(o.scale > 0)) fail("--scale must be positive, got ", o.scale);
  // Separate streams so that changing one knob (e.g. the rate) keeps the others' draws.
  std::mt19937_64 class_rng(o.seed), length_rng(o.seed + 1), sla_rng(o.seed + 2),
      arrival_rng(o.seed + 3), offset_rng(o.seed + 4);
  const std::vector<LengthClass> classes = length_classes(o.kind);
  std::vector<double> arrivals(o.requests, 0.0);
  if (o.rate > 0) arrivals = poisson_arrivals(o.requests, o.rate, arrival_rng);
  std::vector<PlannedRequest> plan;
  for (int i = 0; i < o.requests; ++i) {
    const double u = std::uniform_real_distribution<double>(0, 1)(class_rng);
    size_t c = 0;
    for (double acc = classes[0].share; c + 1 < classes.size() && u >= acc;) {
      acc += classes[++c].share;
    }
    PlannedRequest r;
    r.id = i;
    r.length_class = classes[c].name;
    r.prompt_tokens = scaled_length(classes[c], o.scale, length_rng);
    r.sla = o.sla_mix.pick(sla_rng);
    r.arrival_s = arrivals[i];
    r.text_offset = offset_rng();
    plan.push_back(r);
  }
  return plan;
}

std::vector<PlannedSession> plan_sessions(const WorkloadOptions& o) {
  if (o.sessions < 1) fail("--sessions must be at least 1, got ", o.sessions);
  if (o.turns < 1) fail("--turns must be at least 1, got ", o.turns);
  if (o.history_tokens < 2) fail("--history-tokens must be at least 2, got ", o.history_tokens);
  if (o.turn_tokens < 1) fail("--turn-tokens must be at least 1, got ", o.turn_tokens);
  std::mt19937_64 sla_rng(o.seed + 2), arrival_rng(o.seed + 3), offset_rng(o.seed + 4),
      length_rng(o.seed + 5);
  std::vector<double> arrivals(o.sessions, 0.0);
  if (o.rate > 0) arrivals = poisson_arrivals(o.sessions, o.rate, arrival_rng);
  // History and user lines vary by ±25% around the asked lengths, as real conversations do.
  const LengthClass history{"history", 1, o.history_tokens, o.history_tokens / 4};
  const LengthClass line{"line", 1, o.turn_tokens, o.turn_tokens / 4};
  std::vector<PlannedSession> plan;
  for (int i = 0; i < o.sessions; ++i) {
    PlannedSession s;
    s.id = concat("session-", o.seed, "-", i);
    s.sla = o.sla_mix.pick(sla_rng);
    s.history_tokens = scaled_length(history, o.scale, length_rng);
    for (int t = 0; t < o.turns; ++t) {
      s.user_line_tokens.push_back(std::max(1, scaled_length(line, 1.0, length_rng)));
    }
    s.arrival_s = arrivals[i];
    s.text_offset = offset_rng();
    plan.push_back(s);
  }
  return plan;
}

}  // namespace k25::loadgen
