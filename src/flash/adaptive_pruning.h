// R-PR3 Level 3 (adaptive): during decode, every `interval` generated tokens, the rate of change
// of the KV cache's L2 norm predicts how much compute the next tokens need. A stable norm (the
// text continues as before) switches the FFN of one more block off; a fast-changing norm (new
// content) switches skipped units back on. Only units that can come back safely are touched:
// FFN blocks always (they keep no state), attention blocks only when the plan kept their K/V
// writes (ComputePlan::keep_kv_of_skipped). Extra blocks never take the plan past the request's
// pruning ratio (PlanDecision::max_saved).
//
// Use (engine): per sequence keep an AdaptiveState and the plan chosen at admission (`base`,
// Levels 1-2; the full plan when the request had none). After a decode step that brought the
// sequence to n_positions cached positions, when adaptive pruning is on and
// AdaptivePruner::due(n_generated) says so, call
//   plan = pruner.update(kv, seq, n_positions, base, max_saved, state);
// and run the sequence's next decode steps under `plan` (null = the full model).
#pragma once

#include <memory>

#include "flash/pruning_levels.h"
#include "model/compute_plan.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace k25 {

struct AdaptiveOptions {
  int interval = 32;                 // generated tokens between decisions
  double low_rate = 0.02;            // relative norm change below this: one more FFN block off
  double high_rate = 0.10;           // above this: switch skipped units back on
  double max_extra_fraction = 0.25;  // extra FFN blocks off at most this share of the blocks
  int reference_context = kReferenceContext;  // compute counted as PruningOptions does
};

struct AdaptiveState {
  int shift = 0;          // > 0: extra FFN blocks off; < 0: units of the base plan restored
  double last_rate = -1;  // the last measured rate (-1: none yet)
  int decisions = 0;
};

class AdaptivePruner {
 public:
  AdaptivePruner(const ModelConfig& model, AdaptiveOptions options);

  // True when n_generated (tokens generated so far, >= 1) ends an interval.
  bool due(int n_generated) const {
    return n_generated > 0 && n_generated % options_.interval == 0;
  }
  // Mean L2 norm of the key rows of positions [begin, end) of `seq`, over the layers whose
  // attention `base` runs (their K/V is always written). 0 when there are none.
  double key_norm(KvCache& kv, int seq, int begin, int end, const ComputePlan& base) const;
  // The relative change of key_norm between the last two intervals before n_positions.
  double norm_change_rate(KvCache& kv, int seq, int n_positions, const ComputePlan& base) const;
  // Updates `state` from the rate and returns the plan for the next interval (null: the full
  // model), saving at most `max_saved` of the compute (the request's pruning ratio). Before two
  // intervals of positions exist it returns `base` unchanged.
  std::shared_ptr<const ComputePlan> update(KvCache& kv, int seq, int n_positions,
                                            const ComputePlan& base, double max_saved,
                                            AdaptiveState& state) const;
  // The plan `shift` steps away from `base` (see AdaptiveState::shift), clamped to what is
  // possible within `max_saved`; exposed for tests.
  ComputePlan shifted(const ComputePlan& base, int shift, double max_saved) const;
  const AdaptiveOptions& options() const { return options_; }

 private:
  // Extra FFN blocks that may go off beyond `base`: the share cap and the ratio cap.
  int max_extra(const ComputePlan& base, double max_saved) const;
  int restorable(const ComputePlan& base) const;

  ModelConfig model_;
  AdaptiveOptions options_;
  ComputeCosts costs_;
};

}  // namespace k25
