// R-OPS1 dual-path verification: one completion's tokens with their top-N logprobs, read from
// any OpenAI-compatible answer, and the comparison of two such completions of the same request
// (token equality, KL divergence of the top-N distributions per position, finish_reason).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace k25::verify {

struct TokenLogprobs {
  std::string token;
  double logprob = 0;
  std::map<std::string, double> top;  // piece → logprob of the most likely alternatives
};

struct Completion {
  std::string text;
  std::string finish_reason;
  std::vector<TokenLogprobs> tokens;
};

// Reads choices[0] of a /v1/completions answer with logprobs, in OpenAI's legacy shape
// ({tokens, token_logprobs, top_logprobs: [{piece: logprob}]}) or the chat shape llama-server
// also uses there ({content: [{token, logprob, top_logprobs: [{token, logprob}]}]}).
// Throws k25::Error saying what is missing.
Completion parse_completion(const nlohmann::json& response);

// KL(P || Q) of two top-N logprob sets. The mass a set leaves outside its top N is spread
// evenly over the tokens it lacks (from the other set) plus one "rest" bucket, so sets with
// different members still compare; identical sets give 0.
double top_logprob_kl(const std::map<std::string, double>& p,
                      const std::map<std::string, double>& q);

struct Comparison {
  bool match = true;
  int n_compared = 0;             // positions compared (up to the first differing token)
  int first_token_mismatch = -1;  // position, -1 when the common prefix has equal tokens
  double max_kl = 0;
  int max_kl_position = -1;
  bool finish_reason_differs = false;
  std::vector<std::string> reasons;  // "token", "kl", "finish_reason", "length"
};

// Compares `b` against the reference `a`. Positions after the first differing token are not
// compared (they continue different texts).
Comparison compare_completions(const Completion& a, const Completion& b, double kl_threshold);

}  // namespace k25::verify
