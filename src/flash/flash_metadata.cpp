#include "flash/flash_metadata.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"

namespace k25 {

namespace fs = std::filesystem;

std::unique_ptr<FlashMetadata> FlashMetadata::load(const std::string& dir, const ModelConfig& model,
                                                   int simhash_max_distance) {
  auto meta = std::unique_ptr<FlashMetadata>(new FlashMetadata());
  meta->dir_ = dir;
  meta->matcher_ = DomainMatcher(simhash_max_distance);
  const std::string map_path = (fs::path(dir) / "domain_map.json").string();
  const std::string map_text = read_text_file(map_path, "flash metadata's domain map");
  for (DomainEntry& e : parse_domain_map(map_text, map_path)) {
    const std::string gate_path = (fs::path(dir) / e.gate_file).string();
    GateMlp gate = load_gate_file(gate_path);
    meta->add(std::move(e), std::move(gate), gate_path, model);
  }
  return meta;
}

std::unique_ptr<FlashMetadata> FlashMetadata::load_gguf(const GgufFile& file,
                                                        const ModelConfig& model,
                                                        int simhash_max_distance) {
  if (!file.has(kFlashDomainMapKey)) return nullptr;
  auto meta = std::unique_ptr<FlashMetadata>(new FlashMetadata());
  meta->dir_ = file.path();
  meta->matcher_ = DomainMatcher(simhash_max_distance);
  const std::string source = file.path() + " (" + kFlashDomainMapKey + ")";
  for (DomainEntry& e : parse_domain_map(file.get_string(kFlashDomainMapKey), source)) {
    const std::string key = kFlashGateKeyPrefix + e.name;
    const std::vector<int64_t> values = file.get_int_array(key);
    std::vector<uint8_t> bytes;
    bytes.reserve(values.size());
    for (int64_t v : values) {
      if (v < 0 || v > 255) fail(file.path(), ": metadata key '", key, "' holds a non-byte ", v);
      bytes.push_back(static_cast<uint8_t>(v));
    }
    const std::string gate_source = file.path() + " (" + key + ")";
    GateMlp gate = parse_gate(bytes.data(), bytes.size(), gate_source);
    meta->add(std::move(e), std::move(gate), gate_source, model);
  }
  return meta;
}

void FlashMetadata::add(DomainEntry entry, GateMlp gate, const std::string& source,
                        const ModelConfig& model) {
  if (gate.n_features != kGateFeatures || gate.n_layers != model.n_layers ||
      gate.n_heads != model.n_heads) {
    fail(source, ": gate for ", gate.n_features, " features, ", gate.n_layers, " layers, ",
         gate.n_heads, " heads; the model has ", model.n_layers, " layers, ", model.n_heads,
         " heads (", kGateFeatures, " features)");
  }
  for (uint64_t s : entry.signatures) matcher_.add(entry.name, s);
  gates_.push_back({std::move(entry), std::move(gate)});
}

std::string FlashMetadata::find_gguf(const std::string& model_path) {
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) {
    return fs::is_regular_file(model_path, ec) && model_path.ends_with(".gguf") ? model_path : "";
  }
  const fs::path gguf = fs::path(model_path) / "model.gguf";
  return fs::is_regular_file(gguf, ec) ? gguf.string() : "";
}

std::vector<std::pair<std::string, GgufValue>> flash_gguf_metadata(
    const std::vector<DomainEntry>& entries, const std::vector<const GateMlp*>& gates) {
  std::vector<std::pair<std::string, GgufValue>> keys;
  keys.emplace_back(kFlashDomainMapKey,
                    GgufValue{GgufType::STRING, GgufType::U32, domain_map_json(entries)});
  for (size_t i = 0; i < entries.size() && i < gates.size(); ++i) {
    const std::vector<uint8_t> bytes = gates[i]->serialize();
    keys.emplace_back(
        kFlashGateKeyPrefix + entries[i].name,
        GgufValue{GgufType::ARRAY, GgufType::U8, std::vector<int64_t>(bytes.begin(), bytes.end())});
  }
  return keys;
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
