// k25-verify (R-OPS1): sends the same requests to two OpenAI-compatible servers (greedy, with
// top-N logprobs) and compares them per token: same token, KL divergence of the top-N
// distributions under a threshold, same finish_reason. Prints a summary, writes a JSON report
// of the requests that differ. Exit 0: all match; 1: differences; 2: errors.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "verify/verify_run.h"

int main(int argc, char** argv) {
  CLI::App app(
      "k25-verify: compare two OpenAI-compatible servers token by token (temperature 0, "
      "logprobs)");
  std::string url_a, url_b, requests_path, report_path = "k25_verify_report.json";
  std::string key_a, key_b;
  int max_tokens = 32;
  int timeout_s = 120;
  k25::verify::VerifyOptions options;
  app.add_option("--a", url_a, "reference server, http://host:port[/v1]")->required();
  app.add_option("--b", url_b, "server under test, http://host:port[/v1]")->required();
  app.add_option("--requests", requests_path,
                 "JSONL request set: {\"prompt\", \"max_tokens\"?, \"id\"?} per line "
                 "(default: built-in prompts)");
  app.add_option("--max-tokens", max_tokens, "tokens per request unless the file says")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--logprobs", options.top_logprobs, "top-N logprobs asked for (completions API)")
      ->check(CLI::Range(1, 20));
  app.add_option("--kl-threshold", options.kl_threshold,
                 "largest KL divergence per position that still counts as the same")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--model-a", options.model_a, "model name sent to A (default: its first model)");
  app.add_option("--model-b", options.model_b, "model name sent to B (default: its first model)");
  app.add_option("--api-key-a", key_a, "Bearer key for A");
  app.add_option("--api-key-b", key_b, "Bearer key for B");
  app.add_option("--timeout-s", timeout_s, "seconds per network operation")
      ->check(CLI::Range(1, 86'400));
  app.add_option("--report", report_path, "JSON report of the requests that differ");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    const std::chrono::seconds timeout(timeout_s);
    k25::verify::OpenAiClient a(url_a, key_a, timeout), b(url_b, key_b, timeout);
    std::vector<k25::verify::VerifyRequest> requests =
        requests_path.empty() ? k25::verify::default_requests(max_tokens)
                              : k25::verify::load_requests(requests_path, max_tokens);
    k25::verify::VerifyOutcome outcome = run_verify(a, b, requests, options, std::cerr);
    std::ofstream report(report_path);
    if (!report) k25::fail(report_path, ": cannot write the report");
    report << outcome.report.dump(2) << '\n';
    std::cout << "k25-verify: " << outcome.n_requests << " requests, " << outcome.n_matching
              << " same, " << outcome.n_differing << " differ, " << outcome.n_errors
              << " errors; max KL " << outcome.max_kl << " (threshold " << options.kl_threshold
              << "); report " << report_path << '\n';
    return outcome.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << '\n';
    return 2;
  }
}
