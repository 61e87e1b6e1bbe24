// k25-bench workloads: what each request asks for (prompt length, SLA class, arrival time),
// drawn from a seeded generator so a run can be repeated exactly.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace k25::loadgen {

enum class WorkloadKind { Bimodal, Short, Sessions };
WorkloadKind parse_workload_kind(const std::string& name);  // throws k25::Error when unknown
std::string workload_kind_name(WorkloadKind kind);

// Shares of the x-latency-sla classes, e.g. "20/30/50" = 20% gold, 30% silver, 50% bronze.
struct SlaMix {
  double gold = 0, silver = 0, bronze = 1;
  static SlaMix parse(const std::string& text);  // throws k25::Error on a malformed mix
  std::string pick(std::mt19937_64& rng) const;  // "gold", "silver" or "bronze"
};

// A prompt-length class: lengths drawn uniformly from [mean - spread, mean + spread], times the
// scale factor (at least 2 tokens, so a BOS token leaves room for text).
struct LengthClass {
  std::string name;
  double share = 1;
  int mean = 0, spread = 0;
};
// The classes of a workload: bimodal = 57% short (210±30) / 43% long (12400±1800), short =
// 100% short (128±32); sessions have no length classes (history length is set directly).
std::vector<LengthClass> length_classes(WorkloadKind kind);
int scaled_length(const LengthClass& c, double scale, std::mt19937_64& rng);

struct PlannedRequest {
  int id = 0;
  std::string sla;           // gold, silver, bronze
  std::string length_class;  // short, long
  int prompt_tokens = 0;
  double arrival_s = 0;      // with --rate: when to send, from the start of the run; else 0
  uint64_t text_offset = 0;  // where in the text source the prompt starts
};

struct PlannedSession {
  std::string id;  // sent as "user" and x-session-id
  std::string sla;
  int history_tokens = 0;
  std::vector<int> user_line_tokens;  // one new user line per turn
  double arrival_s = 0;
  uint64_t text_offset = 0;
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::Short;
  double scale = 1;
  int requests = 32;
  SlaMix sla_mix;
  uint64_t seed = 1;
  double rate = 0;  // Poisson arrivals per second; 0 = all at once (a concurrency limit paces them)
  // sessions
  int sessions = 4, turns = 3, history_tokens = 1024, turn_tokens = 32;
};

// Poisson arrival times: exponential gaps of mean 1/rate, starting after the first gap.
std::vector<double> poisson_arrivals(int n, double rate, std::mt19937_64& rng);

std::vector<PlannedRequest> plan_requests(const WorkloadOptions& options);
std::vector<PlannedSession> plan_sessions(const WorkloadOptions& options);

}  // namespace k25::loadgen
