// Gate files and domain maps (k25_metadata, R-PR2): any bytes either parse into a gate whose
// shape matches its data and whose keep-scores are finite probabilities, or are a k25::Error.
// The first input byte picks the parser: even → gate file, odd → domain_map.json.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "flash/domain_map.h"
#include "flash/gate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gate_file = (data[0] & 1) == 0;
  ++data;
  --size;
  try {
    if (gate_file) {
      const k25::GateMlp g = k25::parse_gate(data, size, "fuzz");
      if (g.w1.size() != static_cast<size_t>(g.n_hidden) * g.n_features ||
          g.w2.size() != static_cast<size_t>(g.n_outputs()) * g.n_hidden ||
          g.head_off.size() != static_cast<size_t>(g.n_layers) * g.n_heads) {
        __builtin_trap();
      }
      std::vector<float> features(g.n_features, 0.5f);
      for (float s : g.keep_scores(features.data())) {
        if (!(s >= 0.0f && s <= 1.0f)) __builtin_trap();
      }
      // A parsed gate serialises back to the same bytes.
      if (g.serialize() != std::vector<uint8_t>(data, data + size)) __builtin_trap();
    } else {
      const auto entries = k25::parse_domain_map(
          std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
      bool has_default = false;
      for (const k25::DomainEntry& e : entries) {
        if (!k25::is_valid_domain_name(e.name) || e.gate_file.find('/') != std::string::npos ||
            !(e.pruning_ratio >= 0 && e.pruning_ratio <= 1)) {
          __builtin_trap();
        }
        has_default = has_default || e.name == "default";
      }
      if (!has_default) __builtin_trap();
    }
  } catch (const k25::Error&) {
  }
  return 0;
}
