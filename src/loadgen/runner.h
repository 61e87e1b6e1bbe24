// Drives a k25-bench run: sends the prepared requests (or session turns) with a concurrency limit
// and/or Poisson arrivals, times each stream, stops issuing at the deadline, and reports progress.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/prompt_text.h"
#include "loadgen/stats.h"
#include "loadgen/workload.h"

namespace k25::loadgen {

struct PreparedRequest {
  PlannedRequest plan;
  std::string prompt;
  int prompt_tokens = 0;
};

struct PreparedSession {
  PlannedSession plan;
  std::string history;
  std::vector<std::string> user_lines;
  int first_prompt_tokens = 0;  // history + first user line, as counted
};

// Text of one chat turn appended to a conversation (the format chat clients flatten to).
std::string session_turn_text(const std::string& user_line);

std::vector<PreparedRequest> prepare_requests(const std::vector<PlannedRequest>& plan,
                                              const PromptBuilder& builder);
std::vector<PreparedSession> prepare_sessions(const std::vector<PlannedSession>& plan,
                                              const PromptBuilder& builder);

struct RunOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string model;    // "model" field; omitted when empty
  std::string api_key;  // Authorization: Bearer, when set
  int concurrency = 1;  // requests (sessions) in flight at most; 0 = unlimited
  int max_tokens = 32;
  double temperature = 0;
  uint64_t seed = 1;
  bool ignore_eos = true;
  std::optional<double> duration_s;  // stop issuing after this long
  bool cancel_at_deadline = false;   // and cut off the streams still running
  double timeout_s = 600;
  bool retry_429 = false;
  bool progress = true;  // progress on stderr
  // sessions: a user's pause between an answer and the next turn. While it lasts the session
  // gives its concurrency slot to another one, so turns of many sessions interleave (as chat
  // users do) instead of each session running its turns back to back. 0: no pause, the slot is
  // kept for the whole conversation.
  double think_time_s = 0;
};

struct RunResult {
  std::vector<RequestRecord> records;  // the requests that were sent
  int planned = 0, not_started = 0;
  double wall_s = 0;
};

RunResult run_requests(const RunOptions& options, const std::vector<PreparedRequest>& requests);
// Each session's turns in order, one after another; a failed turn ends its session.
RunResult run_sessions(const RunOptions& options, const std::vector<PreparedSession>& sessions);

}  // namespace k25::loadgen
