#include "verify/verify_run.h"

#include <fstream>
#include <ostream>

#include "core/error.h"
#include "verify/compare.h"

namespace k25::verify {

using nlohmann::json;

namespace {

// The id of the server's first model, or "" when it does not list any.
std::string first_model(const OpenAiClient& client) {
  try {
    json models = client.get("/v1/models");
    if (models.contains("data") && models["data"].is_array() && !models["data"].empty()) {
      return models["data"][0].value("id", "");
    }
  } catch (const Error&) {
    // Not every OpenAI-compatible server lists models; the request goes without one.
  }
  return "";
}

json request_body(const VerifyRequest& r, const std::string& model, int top_logprobs) {
  json body = {{"prompt", r.prompt},
               {"max_tokens", r.max_tokens},
               {"temperature", 0},
               {"logprobs", top_logprobs},
               {"stream", false}};
  if (!model.empty()) body["model"] = model;
  return body;
}

json tokens_json(const Completion& c) {
  json out = json::array();
  for (const TokenLogprobs& t : c.tokens) out.push_back(t.token);
  return out;
}

}  // namespace

std::vector<VerifyRequest> load_requests(const std::string& path, int default_max_tokens) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the request file");
  std::vector<VerifyRequest> out;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) {
      fail(path, ":", line_no, ": expected a JSON object with a string \"prompt\"");
    }
    VerifyRequest r;
    r.prompt = j["prompt"];
    r.max_tokens = default_max_tokens;
    if (j.contains("max_tokens")) {
      if (!j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1) {
        fail(path, ":", line_no, ": max_tokens must be a positive integer");
      }
      r.max_tokens = j["max_tokens"].get<int>();
    }
    r.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>()
                                                   : concat("line-", line_no);
    out.push_back(std::move(r));
  }
  if (out.empty()) fail(path, ": no requests");
  return out;
}

std::vector<VerifyRequest> default_requests(int max_tokens) {
  const char* prompts[] = {
      "Once upon a time",        "The little dog",          "Lily and Tom went to the park",
      "One day, a big bird",     "The sun was shining and", "Mom said to Ben",
      "There was a small house", "The cat saw a red ball"};
  std::vector<VerifyRequest> out;
  int i = 0;
  for (const char* p : prompts) out.push_back({concat("default-", i++), p, max_tokens});
  return out;
}

VerifyOutcome run_verify(const OpenAiClient& a, const OpenAiClient& b,
                         const std::vector<VerifyRequest>& requests, const VerifyOptions& options,
                         std::ostream& progress) {
  const std::string model_a = options.model_a.empty() ? first_model(a) : options.model_a;
  const std::string model_b = options.model_b.empty() ? first_model(b) : options.model_b;
  VerifyOutcome out;
  json differences = json::array(), errors = json::array();
  for (const VerifyRequest& r : requests) {
    ++out.n_requests;
    Completion ca, cb;
    try {
      ca = parse_completion(
          a.post("/v1/completions", request_body(r, model_a, options.top_logprobs)));
      cb = parse_completion(
          b.post("/v1/completions", request_body(r, model_b, options.top_logprobs)));
    } catch (const Error& e) {
      ++out.n_errors;
      errors.push_back({{"id", r.id}, {"prompt", r.prompt}, {"error", e.what()}});
      progress << r.id << ": error: " << e.what() << '\n';
      continue;
    }
    Comparison c = compare_completions(ca, cb, options.kl_threshold);
    out.max_kl = std::max(out.max_kl, c.max_kl);
    if (c.match) {
      ++out.n_matching;
      progress << r.id << ": same (" << c.n_compared << " tokens, max KL " << c.max_kl << ")\n";
      continue;
    }
    ++out.n_differing;
    json d = {{"id", r.id},
              {"prompt", r.prompt},
              {"reasons", c.reasons},
              {"positions_compared", c.n_compared},
              {"max_kl", c.max_kl},
              {"max_kl_position", c.max_kl_position},
              {"finish_reason_a", ca.finish_reason},
              {"finish_reason_b", cb.finish_reason},
              {"text_a", ca.text},
              {"text_b", cb.text},
              {"tokens_a", tokens_json(ca)},
              {"tokens_b", tokens_json(cb)}};
    if (c.first_token_mismatch >= 0) {
      const auto pos = static_cast<size_t>(c.first_token_mismatch);
      d["first_token_mismatch"] = {
          {"position", pos}, {"a", ca.tokens[pos].token}, {"b", cb.tokens[pos].token}};
    }
    differences.push_back(d);
    std::string reasons;
    for (const std::string& reason : c.reasons) reasons += (reasons.empty() ? "" : ",") + reason;
    progress << r.id << ": DIFFERS (" << reasons << "; max KL " << c.max_kl << " at position "
             << c.max_kl_position << ")\n";
  }
  out.report = {{"a", a.base_url()},
                {"b", b.base_url()},
                {"kl_threshold", options.kl_threshold},
                {"top_logprobs", options.top_logprobs},
                {"requests", out.n_requests},
                {"matching", out.n_matching},
                {"differing", out.n_differing},
                {"errors", out.n_errors},
                {"max_kl", out.max_kl},
                {"differences", differences},
                {"error_details", errors}};
  return out;
}

}  // namespace k25::verify
