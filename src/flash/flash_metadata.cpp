#include "flash/flash_metadata.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace k25 {

namespace fs = std::filesystem;

std::unique_ptr<FlashMetadata> FlashMetadata::load(const std::string& dir, const ModelConfig& model,
                                                   int simhash_max_distance) {
  auto meta = std::unique_ptr<FlashMetadata>(new FlashMetadata());
  meta->dir_ = dir;
  meta->matcher_ = DomainMatcher(simhash_max_distance);
  const std::string map_path = (fs::path(dir) / "domain_map.json").string();
  std::ifstream in(map_path);
  if (!in) fail(map_path, ": cannot open (flash metadata needs a domain map)");
  std::stringstream text;
  text << in.rdbuf();
  for (DomainEntry& e : parse_domain_map(text.str(), map_path)) {
    const std::string gate_path = (fs::path(dir) / e.gate_file).string();
    GateMlp gate = load_gate_file(gate_path);
    if (gate.n_features != kGateFeatures || gate.n_layers != model.n_layers ||
        gate.n_heads != model.n_heads) {
      fail(gate_path, ": gate for ", gate.n_features, " features, ", gate.n_layers, " layers, ",
           gate.n_heads, " heads; the model has ", model.n_layers, " layers, ", model.n_heads,
           " heads (", kGateFeatures, " features)");
    }
    for (uint64_t s : e.signatures) meta->matcher_.add(e.name, s);
    meta->gates_.push_back({std::move(e), std::move(gate)});
  }
  return meta;
}

std::string FlashMetadata::find_dir(const std::string& model_path) {
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) return "";
  const fs::path dir = fs::path(model_path) / "k25_metadata";
  return fs::exists(dir / "domain_map.json", ec) ? dir.string() : "";
}

const DomainGate* FlashMetadata::find(std::string_view domain) const {
  for (const DomainGate& g : gates_) {
    if (g.entry.name == domain) return &g;
  }
  return nullptr;
}

std::vector<std::string> FlashMetadata::domains() const {
  std::vector<std::string> out;
  for (const DomainGate& g : gates_) out.push_back(g.entry.name);
  return out;
}

}  // namespace k25
