// What a request tells the scheduler about itself (R-FP1): its latency class and the lengths and
// domain the caller expects. The server reads them from x-* headers (server/flash_headers.h),
// C API callers set them in k25_request.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace k25 {

enum class LatencySla { Gold, Silver, Bronze };

// R-FP4 priorities.
int sla_priority(LatencySla sla);
const char* sla_name(LatencySla sla);
// "gold", "silver" or "bronze"; nullopt for anything else.
std::optional<LatencySla> parse_latency_sla(std::string_view text);

struct FlashHints {
  std::optional<int> prompt_length;     // x-prompt-length: tokens the caller counted
  std::optional<int> response_length;   // x-response-length: output tokens the caller expects
  LatencySla sla = LatencySla::Silver;  // x-latency-sla; default silver (priority 50)
  std::string domain = "default";       // x-domain-hint; default "default"
  bool domain_given = false;
};

}  // namespace k25
