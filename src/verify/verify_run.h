// k25-verify's run: the request set, sending each request to both servers (temperature 0, top-N
// logprobs), comparing the answers and building the JSON report of the requests that differ.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "verify/openai_client.h"

namespace k25::verify {

struct VerifyRequest {
  std::string id;
  std::string prompt;
  int max_tokens = 0;
};

// One JSON object per line: {"prompt": "...", "max_tokens": n (optional), "id": "..." (optional)};
// blank lines skipped. Throws k25::Error naming the file and line.
std::vector<VerifyRequest> load_requests(const std::string& path, int default_max_tokens);
// A small built-in set of story prompts.
std::vector<VerifyRequest> default_requests(int max_tokens);

struct VerifyOptions {
  double kl_threshold = 0.05;
  int top_logprobs = 5;
  std::string model_a;  // "model" sent to each server (empty: its first /v1/models id, if any)
  std::string model_b;
};

struct VerifyOutcome {
  int n_requests = 0;
  int n_matching = 0;
  int n_differing = 0;
  int n_errors = 0;
  double max_kl = 0;
  nlohmann::json
      report;  // {"a", "b", "kl_threshold", counts, "differences": [...], "errors": [...]}
  int exit_code() const { return n_errors > 0 ? 2 : n_differing > 0 ? 1 : 0; }
};

// Sends every request to `a` (the reference) and `b`, one after the other; one progress line per
// request on `progress`.
VerifyOutcome run_verify(const OpenAiClient& a, const OpenAiClient& b,
                         const std::vector<VerifyRequest>& requests, const VerifyOptions& options,
                         std::ostream& progress);

}  // namespace k25::verify
