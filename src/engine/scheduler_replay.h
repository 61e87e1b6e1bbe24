// A workload replayed against the elastic scheduler alone, with step times from a cost model
// instead of a forward pass: the engine's loop around ElasticScheduler (aging since queued or
// last served, the prefill continuation, one decode token per running sequence, the measured step
// budget of StepBudgetCalibrator), in simulated time. It shows what an ordering rule does to
// every request's first token in milliseconds of computation instead of minutes of serving, with
// no noise from the machine; the serving benchmarks (bench/batcher.sh) remain the measurement.
#pragma once

#include <vector>

#include "engine/elastic_scheduler.h"

namespace k25 {

struct ReplayRequest {
  double arrival_s = 0;  // open loop: when it is sent (closed loop: ignored)
  int priority = 50;     // gold 100, silver 50, bronze 10
  int prompt_tokens = 1;
  int max_tokens = 32;  // tokens generated before the request finishes
};

// ms = fixed_ms + per_token_ms * tokens + per_position_ms * positions for one step (positions:
// the sum of its tokens' context positions), the form StepBudgetCalibrator fits.
struct StepCostModel {
  double fixed_ms = 2;
  double per_token_ms = 0.6;
  double per_position_ms = 0.0003;
};

struct ReplayOptions {
  SchedulerOptions scheduler;
  StepCostModel cost;
  double target_step_ms = 150;  // engine.target_step_ms; 0 keeps the configured budget
  int concurrency = 0;          // > 0: closed loop, the next request sent as one finishes
  int page_tokens = 16;
};

struct ReplayOutcome {
  double sent_s = 0;
  double first_token_s = 0;  // since the start
  double finished_s = 0;
  double ttft_s() const { return first_token_s - sent_s; }
};

struct ReplayResult {
  std::vector<ReplayOutcome> requests;  // in the order given
  int steps = 0;
  // Per step: its modelled time and the requests that had prefill tokens in it.
  std::vector<double> step_ms;
  std::vector<std::vector<int>> prefilled;
};

// Throws k25::Error on an empty workload or a bad option (the scheduler's own checks included).
ReplayResult replay_schedule(const std::vector<ReplayRequest>& requests,
                             const ReplayOptions& options);

}  // namespace k25
