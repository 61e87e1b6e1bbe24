// R-FP1: the request-fingerprint headers (x-prompt-length, x-response-length, x-latency-sla,
// x-domain-hint). They are hints: parsed strictly (a malformed value is a 400 naming the header),
// defaults documented in docs/server.md.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace k25 {

enum class LatencySla { Gold, Silver, Bronze };

// R-FP4 priorities.
int sla_priority(LatencySla sla);
const char* sla_name(LatencySla sla);

struct FlashHints {
  std::optional<int> prompt_length;     // x-prompt-length: tokens the caller counted
  std::optional<int> response_length;   // x-response-length: output tokens the caller expects
  LatencySla sla = LatencySla::Silver;  // x-latency-sla; default silver (priority 50)
  std::string domain = "default";       // x-domain-hint; default "default"
  bool domain_given = false;
};

// Largest value accepted in the length headers.
inline constexpr int kMaxHeaderLength = 100'000'000;

// `header(name)` returns a header's value when present (name in lower case). Throws
// ApiException (400, param = the header name) on a malformed value. Does not check whether the
// domain is known (see check_domain_known).
FlashHints parse_flash_headers(
    const std::function<std::optional<std::string_view>(std::string_view)>& header);

// Domains with a gate; only "default" until gated pruning lands.
bool is_known_domain(std::string_view domain);

}  // namespace k25
