#include "flash/request_hints.h"

namespace k25 {

int sla_priority(LatencySla sla) {
  switch (sla) {
    case LatencySla::Gold:
      return 100;
    case LatencySla::Silver:
      return 50;
    case LatencySla::Bronze:
      return 10;
  }
  return 50;
}

const char* sla_name(LatencySla sla) {
  switch (sla) {
    case LatencySla::Gold:
      return "gold";
    case LatencySla::Silver:
      return "silver";
    case LatencySla::Bronze:
      return "bronze";
  }
  return "silver";
}

std::optional<LatencySla> parse_latency_sla(std::string_view text) {
  for (LatencySla sla : {LatencySla::Gold, LatencySla::Silver, LatencySla::Bronze}) {
    if (text == sla_name(sla)) return sla;
  }
  return std::nullopt;
}

}  // namespace k25
