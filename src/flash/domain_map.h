// k25_metadata/domain_map.json (R-M3): per domain its gate file, pruning ratio and the SimHash
// signatures of its templates (R-FP2), e.g.
//   {"legal": {"gate_file": "legal_gate.bin", "pruning_ratio": 0.42,
//              "signatures": ["9f3a0c1e55d27b80", ...]}, "default": {...}}
// Parsed as untrusted input: every problem is a k25::Error naming the domain and key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace k25 {

struct DomainEntry {
  std::string name;
  std::string gate_file;  // a file name inside k25_metadata/ (no directories)
  double pruning_ratio = 0.35;
  std::vector<uint64_t> signatures;
};

// Domain names: 1-64 characters of [A-Za-z0-9_.-], case-sensitive (as x-domain-hint).
bool is_valid_domain_name(std::string_view name);

// The entries in name order; "default" must be one of them.
std::vector<DomainEntry> parse_domain_map(std::string_view json_text, const std::string& source);
std::string domain_map_json(const std::vector<DomainEntry>& entries);

}  // namespace k25
