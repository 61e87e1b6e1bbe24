#include "verify/compare.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace k25::verify {

using nlohmann::json;

namespace {

constexpr double kMinProbability = 1e-10;

double number(const json& j, const char* what, size_t position) {
  if (!j.is_number()) fail("logprobs: ", what, " at position ", position, " is not a number");
  return j.get<double>();
}

std::string text_of(const json& j, const char* what, size_t position) {
  if (!j.is_string()) fail("logprobs: ", what, " at position ", position, " is not a string");
  return j.get<std::string>();
}

void parse_legacy(const json& lp, Completion& out) {
  const json& tokens = lp.at("tokens");
  const json& values = lp.at("token_logprobs");
  const json* top = lp.contains("top_logprobs") ? &lp["top_logprobs"] : nullptr;
  if (!tokens.is_array() || !values.is_array() || tokens.size() != values.size()) {
    fail("logprobs: tokens and token_logprobs must be arrays of the same length");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    TokenLogprobs t;
    t.token = text_of(tokens[i], "token", i);
    t.logprob = number(values[i], "token_logprob", i);
    if (top && top->is_array() && i < top->size() && (*top)[i].is_object()) {
      for (const auto& [piece, value] : (*top)[i].items()) {
        t.top[piece] = number(value, "top_logprobs value", i);
      }
    }
    out.tokens.push_back(std::move(t));
  }
}

void parse_content(const json& content, Completion& out) {
  if (!content.is_array()) fail("logprobs: content must be an array");
  for (size_t i = 0; i < content.size(); ++i) {
    const json& e = content[i];
    TokenLogprobs t;
    t.token = text_of(e.value("token", json()), "token", i);
    t.logprob = number(e.value("logprob", json()), "logprob", i);
    const json top = e.value("top_logprobs", json::array());
    for (size_t k = 0; top.is_array() && k < top.size(); ++k) {
      t.top[text_of(top[k].value("token", json()), "top token", i)] =
          number(top[k].value("logprob", json()), "top logprob", i);
    }
    out.tokens.push_back(std::move(t));
  }
}

}  // namespace

Completion parse_completion(const json& response) {
  if (!response.is_object() || !response.contains("choices") || !response["choices"].is_array() ||
      response["choices"].empty()) {
    fail("response: no choices[0]");
  }
  const json& choice = response["choices"][0];
  Completion out;
  if (choice.contains("text") && choice["text"].is_string()) out.text = choice["text"];
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    out.finish_reason = choice["finish_reason"];
  }
  if (!choice.contains("logprobs") || !choice["logprobs"].is_object()) {
    fail("response: choices[0].logprobs is missing (does the server support logprobs?)");
  }
  const json& lp = choice["logprobs"];
  try {
    if (lp.contains("content")) {
      parse_content(lp["content"], out);
    } else {
      parse_legacy(lp, out);
    }
  } catch (const json::exception& e) {
    fail("response: malformed logprobs: ", e.what());
  }
  return out;
}

double top_logprob_kl(const std::map<std::string, double>& p,
                      const std::map<std::string, double>& q) {
  std::vector<std::string> support;
  for (const auto& [token, lp] : p) support.push_back(token);
  for (const auto& [token, lp] : q) {
    if (!p.count(token)) support.push_back(token);
  }
  // Probabilities over support + "rest" for one set.
  auto spread = [&](const std::map<std::string, double>& set) {
    double known = 0;
    int missing = 1;  // the rest bucket
    for (const std::string& token : support) {
      auto it = set.find(token);
      if (it != set.end()) {
        known += std::exp(it->second);
      } else {
        ++missing;
      }
    }
    const double each = std::max(1.0 - known, 0.0) / missing;
    std::vector<double> probs;
    for (const std::string& token : support) {
      auto it = set.find(token);
      probs.push_back(std::max(it != set.end() ? std::exp(it->second) : each, kMinProbability));
    }
    probs.push_back(std::max(each, kMinProbability));
    return probs;
  };
  const std::vector<double> ps = spread(p), qs = spread(q);
  double kl = 0;
  for (size_t i = 0; i < ps.size(); ++i) kl += ps[i] * std::log(ps[i] / qs[i]);
  return std::max(kl, 0.0);
}

Comparison compare_completions(const Completion& a, const Completion& b, double kl_threshold) {
  Comparison c;
  const size_t n = std::min(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < n; ++i) {
    ++c.n_compared;
    const double kl = top_logprob_kl(a.tokens[i].top, b.tokens[i].top);
    if (kl > c.max_kl || c.max_kl_position < 0) {
      c.max_kl = kl;
      c.max_kl_position = static_cast<int>(i);
    }
    if (a.tokens[i].token != b.tokens[i].token) {
      c.first_token_mismatch = static_cast<int>(i);
      break;
    }
  }
  if (c.first_token_mismatch >= 0) c.reasons.push_back("token");
  if (c.max_kl > kl_threshold) c.reasons.push_back("kl");
  if (c.first_token_mismatch < 0 && a.tokens.size() != b.tokens.size()) {
    c.reasons.push_back("length");
  }
  if (a.finish_reason != b.finish_reason) {
    c.finish_reason_differs = true;
    c.reasons.push_back("finish_reason");
  }
  c.match = c.reasons.empty();
  return c;
}

}  // namespace k25::verify
