#include "server/flash_headers.h"

#include "core/error.h"
#include "server/api_error.h"

namespace k25 {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (s.size() > 64) out += "...";
  return out;
}

// A non-negative decimal integer, digits only (no sign, no exponent), at most kMaxHeaderLength.
int parse_length(std::string_view name, std::string_view raw) {
  std::string_view v = trim(raw);
  if (v.empty())
    throw_bad_request(concat(name, ": empty value"), std::string(name), "invalid_header");
  long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9' || n > kMaxHeaderLength) {
      throw_bad_request(
          concat(name, ": expected a non-negative integer token count, got '", printable(raw), "'"),
          std::string(name), "invalid_header");
    }
    n = n * 10 + (c - '0');
  }
  if (n > kMaxHeaderLength) {
    throw_bad_request(concat(name, ": ", n, " is larger than ", kMaxHeaderLength),
                      std::string(name), "invalid_header");
  }
  return static_cast<int>(n);
}

bool is_domain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

}  // namespace

FlashHints parse_flash_headers(
    const std::function<std::optional<std::string_view>(std::string_view)>& header) {
  FlashHints hints;
  if (auto v = header("x-prompt-length")) hints.prompt_length = parse_length("x-prompt-length", *v);
  if (auto v = header("x-response-length")) {
    hints.response_length = parse_length("x-response-length", *v);
  }
  if (auto v = header("x-latency-sla")) {
    if (std::optional<LatencySla> sla = parse_latency_sla(trim(*v))) {
      hints.sla = *sla;
    } else {
      throw_bad_request(
          concat("x-latency-sla: expected gold, silver or bronze, got '", printable(*v), "'"),
          "x-latency-sla", "invalid_header");
    }
  }
  if (auto v = header("x-domain-hint")) {
    std::string_view domain = trim(*v);
    bool ok = !domain.empty() && domain.size() <= 64;
    for (char c : domain) ok = ok && is_domain_char(c);
    if (!ok) {
      throw_bad_request(concat("x-domain-hint: expected a domain name of 1-64 characters "
                               "[A-Za-z0-9_.-], got '",
                               printable(*v), "'"),
                        "x-domain-hint", "invalid_header");
    }
    hints.domain = std::string(domain);
    hints.domain_given = true;
  }
  return hints;
}

}  // namespace k25
