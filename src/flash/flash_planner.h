// The Flash decision on the request path: fingerprint (R-FP), then the compute plan (R-PR3
// Levels 1-2), with the counters /metrics exports (R-FP3, R-PR5). Thread-safe: the server calls
// it from its I/O threads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "flash/fingerprint.h"
#include "flash/flash_metadata.h"
#include "flash/pruning_levels.h"

namespace k25 {

struct FlashOptions {
  bool pruning_enabled = true;  // false: every request runs the full model (level 0)
  bool adaptive = true;         // Level 3 may run (plans keep the K/V writes of skipped blocks)
  // Level 1 rule: "auto" = on when calibrated metadata is loaded, "on", "off".
  std::string rule_mode = "auto";
  RuleOptions rule;
  int simhash_max_distance = 10;
  std::string metadata_dir;  // "" = <model path>/k25_metadata when present
};

struct FlashResult {
  Fingerprint fingerprint;
  PlanDecision decision;
  double fingerprint_ms = 0;  // fingerprint and plan choice together
};

class FlashPlanner {
 public:
  // Loads the metadata (throws k25::Error naming the file on a bad one).
  FlashPlanner(const ModelConfig& model, const std::string& model_path, FlashOptions options);

  bool knows_domain(std::string_view domain) const { return policy_->knows_domain(domain); }
  bool has_metadata() const { return metadata_ != nullptr; }
  const FlashMetadata* metadata() const { return metadata_.get(); }
  const PruningPolicy& policy() const { return *policy_; }

  FlashResult plan(const FingerprintInput& in, bool pruning_off);
  // A request finished after `tokens` forward evaluations under `decision`.
  void record_finished(const PlanDecision& decision, int tokens);
  // Prometheus text: flash_pruned_requests_total, flash_skipped_block_evaluations_total,
  // flash_requests_by_level_total, flash_fingerprint_seconds (summary: count, sum, max).
  std::string render_metrics() const;

 private:
  std::unique_ptr<FlashMetadata> metadata_;
  std::unique_ptr<PruningPolicy> policy_;
  std::atomic<uint64_t> pruned_requests_{0};
  std::atomic<uint64_t> skipped_block_evaluations_{0};
  std::atomic<uint64_t> by_level_[3] = {0, 0, 0};
  mutable std::mutex timing_mutex_;
  uint64_t fingerprint_count_ = 0;
  double fingerprint_seconds_sum_ = 0;
  double fingerprint_seconds_max_ = 0;
};

}  // namespace k25
