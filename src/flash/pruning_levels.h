// R-PR3: how much of the model a request runs. Level 1 (rule: short request → skip the FFN of
// the last blocks), Level 2 (the domain's gate and head mask, bounded by its pruning_ratio);
// Level 3 (adaptive, during decode) lives in flash/adaptive_pruning.h.
#pragma once

#include <memory>

#include "flash/fingerprint.h"
#include "flash/flash_metadata.h"
#include "flash/gate.h"
#include "model/compute_plan.h"
#include "model/model_config.h"

namespace k25 {

// Multiply-accumulates per token of each switchable unit, to bound and report the compute a plan
// saves. Attention work grows with the context: it is counted at `context_tokens`.
struct ComputeCosts {
  double q_and_output = 0;    // per block: Q and output projections
  double kv_projection = 0;   // per block: K and V projections
  double head_attention = 0;  // per head and block: scores and weighted sum over the context
  double ffn = 0;             // per block
  double fixed = 0;           // embedding lookup and output head (never skipped)
  double total = 0;           // the full model
};
ComputeCosts compute_costs(const ModelConfig& model, int context_tokens);
// Share of the full model's per-token work that `plan` does not do (0 for the full plan).
double compute_saved(const ComputePlan& plan, const ComputeCosts& costs);

struct RuleOptions {
  bool enabled = false;
  int max_prompt_tokens = 512;  // the rule applies below both thresholds
  int max_response_tokens = 128;
  // Share of the blocks whose FFN is skipped: the note's 4 of 40, scaled with the model's depth.
  double ffn_skip_fraction = 0.1;
};
// Blocks the rule skips for a model of n_layers: round(fraction * n_layers), at least 1 when the
// fraction is positive, never the first block.
int rule_ffn_blocks(const RuleOptions& rule, int n_layers);

// Context length at which attention work is counted when bounding and reporting compute.
inline constexpr int kReferenceContext = 256;

struct PruningOptions {
  RuleOptions rule;
  bool gates_enabled = true;  // Level 2 when calibrated metadata is loaded
  // Level 3 may run: plans then keep the K/V writes of skipped attention blocks.
  bool adaptive = true;
  int reference_context = kReferenceContext;
  // R-PR4's global pruning_ratio: bounds a request whose domain has no calibrated ratio (a plain
  // model with the rule switched on).
  double default_ratio = 0.35;
};

struct PlanDecision {
  int level = 0;                            // highest level applied (0: the full model)
  std::shared_ptr<const ComputePlan> plan;  // null: the full model
  double compute_saved = 0;                 // share of per-token work skipped
  // The domain's pruning_ratio: bounds the plan at every level, Level 3's changes included.
  double max_saved = 0;
};

// Switches the FFN of up to `n` more blocks off, from the last block down (never block 0; blocks
// already off are passed over), each only while the compute saved stays within `ratio`. Returns
// how many it switched off. The Level 1 rule and Level 3's extra blocks both take this path.
int ffn_off_from_last(ComputePlan& plan, int n, double ratio, const ComputeCosts& costs);

// Level 2 on top of `plan`: the gate's head mask, then the blocks with the lowest keep-scores
// below 0.5, each as long as the compute saved stays within `ratio`. Used by the server and by the
// calibration that trains the gate.
void apply_gate(const GateMlp& gate, const GateFeatures& features, double ratio,
                const ComputeCosts& costs, ComputePlan& plan);

// Levels 1-2 of one request, bounded by `ratio`: the rule's FFN blocks (from the last block
// down, while within the ratio) when the request is short, then `gate` (may be null: no Level 2).
// What PruningPolicy::decide serves and what calibration measures.
PlanDecision plan_request(const ModelConfig& model, const PruningOptions& options,
                          const ComputeCosts& costs, const GateMlp* gate, double ratio,
                          const Fingerprint& fp);

class PruningPolicy {
 public:
  // `metadata` may be null (a plain model: Level 2 never applies); it must outlive the policy.
  PruningPolicy(const ModelConfig& model, PruningOptions options, const FlashMetadata* metadata);

  // Always succeeds: an unknown domain is rejected earlier (knows_domain).
  PlanDecision decide(const Fingerprint& fp, bool pruning_off) const;
  bool knows_domain(std::string_view domain) const;
  const PruningOptions& options() const { return options_; }
  const ComputeCosts& costs() const { return costs_; }

 private:
  ModelConfig model_;
  PruningOptions options_;
  const FlashMetadata* metadata_;
  ComputeCosts costs_;
};

}  // namespace k25
