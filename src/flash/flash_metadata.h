// The calibrated metadata of a k25-convert output: the domain map, every domain's gate (checked
// against the model's shape) and the SimHash matcher built from the signatures. It is stored
// twice: as files in k25_metadata/ and inside model.gguf as metadata keys
//   k25.flash.domain_map     string, the domain_map.json text
//   k25.flash.gate.<domain>  u8 array, the <domain>_gate.bin bytes (checksum included)
// so that the GGUF file alone carries its gates (R-M3).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flash/domain_map.h"
#include "flash/fingerprint.h"
#include "flash/gate.h"
#include "formats/gguf.h"
#include "model/model_config.h"

namespace k25 {

struct DomainGate {
  DomainEntry entry;
  GateMlp gate;
};

class FlashMetadata {
 public:
  // `dir` is the k25_metadata directory. Throws k25::Error naming the file and problem.
  static std::unique_ptr<FlashMetadata> load(const std::string& dir, const ModelConfig& model,
                                             int simhash_max_distance);
  // From the k25.flash.* keys of a GGUF file; null when it has none.
  static std::unique_ptr<FlashMetadata> load_gguf(const GgufFile& file, const ModelConfig& model,
                                                  int simhash_max_distance);
  // The k25_metadata directory of a model path (a k25-convert output directory) or "".
  static std::string find_dir(const std::string& model_path);
  // The GGUF file of a model path (the file itself, or model.gguf of a directory) or "".
  static std::string find_gguf(const std::string& model_path);

  const DomainGate* find(std::string_view domain) const;  // null when unknown
  const DomainMatcher& matcher() const { return matcher_; }
  std::vector<std::string> domains() const;
  const std::string& dir() const { return dir_; }

 private:
  void add(DomainEntry entry, GateMlp gate, const std::string& source, const ModelConfig& model);
  std::string dir_;
  std::vector<DomainGate> gates_;
  DomainMatcher matcher_;
};

inline constexpr char kFlashDomainMapKey[] = "k25.flash.domain_map";
inline constexpr char kFlashGateKeyPrefix[] = "k25.flash.gate.";

// The k25.flash.* keys for these domains and their gates (same order).
std::vector<std::pair<std::string, GgufValue>> flash_gguf_metadata(
    const std::vector<DomainEntry>& entries, const std::vector<const GateMlp*>& gates);

}  // namespace k25
