#include "flash/flash_planner.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/error.h"

namespace k25 {

FlashPlanner::FlashPlanner(const ModelConfig& model, const std::string& model_path,
                           FlashOptions options) {
  std::string dir = options.metadata_dir;
  if (dir.empty()) dir = FlashMetadata::find_dir(model_path);
  if (!dir.empty()) {
    metadata_ = FlashMetadata::load(dir, model, options.simhash_max_distance);
  } else if (const std::string gguf = FlashMetadata::find_gguf(model_path); !gguf.empty()) {
    // No side files: the gates k25-convert stored inside the model file, if any.
    metadata_ =
        FlashMetadata::load_gguf(*GgufFile::open(gguf), model, options.simhash_max_distance);
  }
  if (options.rule_mode != "auto" && options.rule_mode != "on" && options.rule_mode != "off") {
    fail("flash: rule mode '", options.rule_mode, "' is not auto, on or off");
  }
  PruningOptions p;
  p.rule = options.rule;
  p.rule.enabled = options.pruning_enabled &&
                   (options.rule_mode == "on" || (options.rule_mode == "auto" && metadata_));
  p.gates_enabled = options.pruning_enabled;
  p.adaptive = options.adaptive;
  policy_ = std::make_unique<PruningPolicy>(model, p, metadata_.get());
}

FlashResult FlashPlanner::plan(const FingerprintInput& in, bool pruning_off) {
  const auto start = std::chrono::steady_clock::now();
  FlashResult r;
  r.fingerprint = fingerprint_request(in, metadata_ ? &metadata_->matcher() : nullptr);
  r.decision = policy_->decide(r.fingerprint, pruning_off);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.fingerprint_ms = seconds * 1e3;
  {
    std::lock_guard lock(timing_mutex_);
    ++fingerprint_count_;
    fingerprint_seconds_sum_ += seconds;
    fingerprint_seconds_max_ = std::max(fingerprint_seconds_max_, seconds);
  }
  by_level_[std::clamp(r.decision.level, 0, 2)]++;
  if (r.decision.plan) ++pruned_requests_;
  return r;
}

void FlashPlanner::record_finished(const PlanDecision& decision, int tokens) {
  if (!decision.plan || tokens <= 0) return;
  skipped_block_evaluations_ += static_cast<uint64_t>(decision.plan->skipped_blocks()) * tokens;
}

std::string FlashPlanner::render_metrics() const {
  std::ostringstream out;
  out << "# HELP flash_pruned_requests_total Requests that ran under a pruned compute plan.\n"
      << "# TYPE flash_pruned_requests_total counter\n"
      << "flash_pruned_requests_total " << pruned_requests_.load() << "\n"
      << "# HELP flash_skipped_block_evaluations_total Attention/FFN block evaluations skipped "
         "(blocks off x tokens).\n"
      << "# TYPE flash_skipped_block_evaluations_total counter\n"
      << "flash_skipped_block_evaluations_total " << skipped_block_evaluations_.load() << "\n"
      << "# HELP flash_requests_by_level_total Requests by the pruning level chosen at admission.\n"
      << "# TYPE flash_requests_by_level_total counter\n";
  for (int l = 0; l < 3; ++l) {
    out << "flash_requests_by_level_total{level=\"" << l << "\"} " << by_level_[l].load() << "\n";
  }
  std::lock_guard lock(timing_mutex_);
  out << "# HELP flash_fingerprint_seconds Fingerprint and plan choice per request.\n"
      << "# TYPE flash_fingerprint_seconds summary\n"
      << "flash_fingerprint_seconds_count " << fingerprint_count_ << "\n"
      << "flash_fingerprint_seconds_sum " << fingerprint_seconds_sum_ << "\n"
      << "# TYPE flash_fingerprint_seconds_max gauge\n"
      << "flash_fingerprint_seconds_max " << fingerprint_seconds_max_ << "\n";
  return out.str();
}

}  // namespace k25
