#include "flash/adaptive_pruning.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace k25 {

AdaptivePruner::AdaptivePruner(const ModelConfig& model, AdaptiveOptions options)
    : model_(model), options_(options), costs_(compute_costs(model, options.reference_context)) {
  if (options_.interval < 1) fail("adaptive pruning: interval ", options_.interval, " < 1");
}

double AdaptivePruner::key_norm(KvCache& kv, int seq, int begin, int end,
                                const ComputePlan& base) const {
  const int kv_dim = model_.kv_dim();
  std::vector<float> k(kv_dim);  // one key as floats
  double sum = 0;
  int64_t rows = 0;
  for (int l = 0; l < model_.n_layers; ++l) {
    if (!base.attention(l) && !base.keep_kv_of_skipped) continue;  // keys never written
    for (int p = begin; p < end; ++p) {
      kv.load_key(seq, l, p, k.data(), kv_dim);
      double sq = 0;
      for (int i = 0; i < kv_dim; ++i) {
        const double x = k[i];
        sq += x * x;
      }
      sum += std::sqrt(sq);
      ++rows;
    }
  }
  return rows > 0 ? sum / static_cast<double>(rows) : 0.0;
}

double AdaptivePruner::norm_change_rate(KvCache& kv, int seq, int n_positions,
                                        const ComputePlan& base) const {
  const int w = options_.interval;
  const double now = key_norm(kv, seq, n_positions - w, n_positions, base);
  const double before = key_norm(kv, seq, n_positions - 2 * w, n_positions - w, base);
  return before > 0 ? std::abs(now - before) / before : 0.0;
}

int AdaptivePruner::max_extra(const ComputePlan& base, double max_saved) const {
  const int by_share = static_cast<int>(std::floor(options_.max_extra_fraction * model_.n_layers));
  ComputePlan plan = base;
  return ffn_off_from_last(plan, by_share, max_saved, costs_);
}

int AdaptivePruner::restorable(const ComputePlan& base) const {
  int n = static_cast<int>(base.skipped_ffn_layers().size());
  if (base.keep_kv_of_skipped) n += static_cast<int>(base.skipped_attention_layers().size());
  return n;
}

ComputePlan AdaptivePruner::shifted(const ComputePlan& base, int shift, double max_saved) const {
  ComputePlan plan = base;
  if (shift > 0) {
    ffn_off_from_last(plan, std::min(shift, max_extra(base, max_saved)), max_saved, costs_);
  } else if (shift < 0) {
    // Restore the base plan's skipped FFN blocks from the first layer up, then its attention
    // blocks when their K/V was kept.
    int left = -shift;
    for (int l = 0; l < model_.n_layers && left > 0; ++l) {
      if (!plan.ffn(l)) {
        plan.set_ffn(l, true);
        --left;
      }
    }
    for (int l = 0; l < model_.n_layers && left > 0 && plan.keep_kv_of_skipped; ++l) {
      if (!plan.attention(l)) {
        plan.set_attention(l, true);
        --left;
      }
    }
  }
  return plan;
}

std::shared_ptr<const ComputePlan> AdaptivePruner::update(KvCache& kv, int seq, int n_positions,
                                                          const ComputePlan& base, double max_saved,
                                                          AdaptiveState& state) const {
  check_plan_shape(base, model_.n_layers, model_.n_heads);
  if (n_positions >= 2 * options_.interval) {
    const double rate = norm_change_rate(kv, seq, n_positions, base);
    state.last_rate = rate;
    ++state.decisions;
    if (rate < options_.low_rate) {
      state.shift = std::min(state.shift + 1, max_extra(base, max_saved));
    } else if (rate > options_.high_rate) {
      state.shift = std::max(std::min(state.shift, 0) - 1, -restorable(base));
    }
  }
  ComputePlan plan = shifted(base, state.shift, max_saved);
  if (plan.is_full()) return nullptr;
  return std::make_shared<const ComputePlan>(std::move(plan));
}

}  // namespace k25
