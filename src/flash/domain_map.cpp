#include "flash/domain_map.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace k25 {

using nlohmann::json;

namespace {

constexpr size_t kMaxDomains = 1024, kMaxSignatures = 4096;

uint64_t parse_signature(const json& v, const std::string& where) {
  if (!v.is_string() || v.get_ref<const std::string&>().size() != 16) {
    fail(where, ": expected a signature of 16 hex digits");
  }
  uint64_t out = 0;
  for (char ch : v.get_ref<const std::string&>()) {
    int d;
    if (ch >= '0' && ch <= '9') {
      d = ch - '0';
    } else if (ch >= 'a' && ch <= 'f') {
      d = ch - 'a' + 10;
    } else if (ch >= 'A' && ch <= 'F') {
      d = ch - 'A' + 10;
    } else {
      fail(where, ": expected a signature of 16 hex digits");
    }
    out = out << 4 | static_cast<uint64_t>(d);
  }
  return out;
}

}  // namespace

bool is_valid_domain_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<DomainEntry> parse_domain_map(std::string_view text, const std::string& source) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) fail(source, ": not valid JSON");
  if (!doc.is_object()) fail(source, ": expected a JSON object of domains");
  if (doc.size() > kMaxDomains) fail(source, ": more than ", kMaxDomains, " domains");
  std::vector<DomainEntry> out;
  bool has_default = false;
  for (const auto& [name, value] : doc.items()) {
    const std::string where = source + ": domain '" + name + "'";
    if (!is_valid_domain_name(name)) {
      fail(source, ": domain name '", name, "' is not 1-64 characters of [A-Za-z0-9_.-]");
    }
    if (!value.is_object()) fail(where, ": expected an object");
    DomainEntry e;
    e.name = name;
    const auto file = value.find("gate_file");
    if (file == value.end() || !file->is_string()) fail(where, ": gate_file must be a string");
    e.gate_file = file->get<std::string>();
    if (e.gate_file.empty() || e.gate_file.size() > 255 ||
        e.gate_file.find('/') != std::string::npos || e.gate_file.find('\\') != std::string::npos ||
        e.gate_file == "." || e.gate_file == "..") {
      fail(where, ": gate_file '", e.gate_file, "' must be a plain file name in k25_metadata/");
    }
    const auto ratio = value.find("pruning_ratio");
    if (ratio != value.end()) {
      if (!ratio->is_number()) fail(where, ": pruning_ratio must be a number");
      e.pruning_ratio = ratio->get<double>();
      if (!(e.pruning_ratio >= 0.0 && e.pruning_ratio <= 1.0)) {
        fail(where, ": pruning_ratio ", e.pruning_ratio, " is outside [0, 1]");
      }
    }
    const auto sigs = value.find("signatures");
    if (sigs != value.end()) {
      if (!sigs->is_array() || sigs->size() > kMaxSignatures) {
        fail(where, ": signatures must be an array of at most ", kMaxSignatures, " strings");
      }
      for (const json& s : *sigs) e.signatures.push_back(parse_signature(s, where + " signatures"));
    }
    has_default = has_default || name == "default";
    out.push_back(std::move(e));
  }
  if (!has_default) fail(source, ": no 'default' domain");
  return out;
}

std::string domain_map_json(const std::vector<DomainEntry>& entries) {
  json doc = json::object();
  for (const DomainEntry& e : entries) {
    json sigs = json::array();
    for (uint64_t s : e.signatures) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(s));
      sigs.push_back(hex);
    }
    doc[e.name] = {
        {"gate_file", e.gate_file}, {"pruning_ratio", e.pruning_ratio}, {"signatures", sigs}};
  }
  return doc.dump(2) + "\n";
}

}  // namespace k25
