// The calibrated metadata of a k25-convert output (k25_metadata/): the domain map, every domain's
// gate (checked against the model's shape) and the SimHash matcher built from the signatures.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flash/domain_map.h"
#include "flash/fingerprint.h"
#include "flash/gate.h"
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
  // The k25_metadata directory of a model path (a k25-convert output directory) or "".
  static std::string find_dir(const std::string& model_path);

  const DomainGate* find(std::string_view domain) const;  // null when unknown
  const DomainMatcher& matcher() const { return matcher_; }
  std::vector<std::string> domains() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::vector<DomainGate> gates_;
  DomainMatcher matcher_;
};

}  // namespace k25
