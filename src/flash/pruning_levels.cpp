#include "flash/pruning_levels.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace k25 {

ComputeCosts compute_costs(const ModelConfig& m, int context_tokens) {
  ComputeCosts c;
  const double dim = m.dim, q_dim = double(m.n_heads) * m.head_dim, kv_dim = m.kv_dim();
  c.q_and_output = 2 * dim * q_dim;
  c.kv_projection = 2 * dim * kv_dim;
  c.head_attention = 2.0 * std::max(1, context_tokens) * m.head_dim;
  c.ffn = 3 * dim * m.ffn_dim;
  c.fixed = dim * m.n_vocab;
  c.total = c.fixed +
            m.n_layers * (c.q_and_output + c.kv_projection + m.n_heads * c.head_attention + c.ffn);
  return c;
}

double compute_saved(const ComputePlan& plan, const ComputeCosts& c) {
  double saved = 0;
  for (int l = 0; l < plan.n_layers; ++l) {
    if (!plan.ffn(l)) saved += c.ffn;
    if (!plan.attention(l) || plan.heads_on(l) == 0) {
      saved += c.q_and_output + plan.n_heads * c.head_attention;
      if (!plan.keep_kv_of_skipped) saved += c.kv_projection;
    } else {
      saved += (plan.n_heads - plan.heads_on(l)) * c.head_attention;
    }
  }
  return c.total > 0 ? saved / c.total : 0.0;
}

int rule_ffn_blocks(const RuleOptions& rule, int n_layers) {
  if (rule.ffn_skip_fraction <= 0 || n_layers <= 1) return 0;
  const int n = static_cast<int>(std::lround(rule.ffn_skip_fraction * n_layers));
  return std::clamp(n, 1, n_layers - 1);
}

int ffn_off_from_last(ComputePlan& plan, int n, double ratio, const ComputeCosts& costs) {
  int done = 0;
  for (int l = plan.n_layers - 1; l >= 1 && done < n; --l) {
    if (!plan.ffn(l)) continue;
    ComputePlan next = plan;
    next.set_ffn(l, false);
    if (compute_saved(next, costs) > ratio + 1e-9) break;
    plan = std::move(next);
    ++done;
  }
  return done;
}

void apply_gate(const GateMlp& gate, const GateFeatures& features, double ratio,
                const ComputeCosts& costs, ComputePlan& plan) {
  for (int l = 0; l < plan.n_layers; ++l) {
    for (int h = 0; h < plan.n_heads; ++h) {
      if (!gate.head_off[static_cast<size_t>(l) * gate.n_heads + h]) continue;
      ComputePlan next = plan;
      next.set_head(l, h, false);
      if (compute_saved(next, costs) <= ratio + 1e-9) plan = std::move(next);
    }
  }
  const std::vector<float> scores = gate.keep_scores(features.data());
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] < scores[b]; });
  for (int unit : order) {
    if (scores[unit] >= 0.5f) break;
    const int layer = unit % plan.n_layers;
    const bool is_ffn = unit >= plan.n_layers;
    ComputePlan next = plan;
    if (is_ffn) {
      next.set_ffn(layer, false);
    } else {
      next.set_attention(layer, false);
    }
    if (compute_saved(next, costs) <= ratio + 1e-9) plan = std::move(next);
  }
}

PruningPolicy::PruningPolicy(const ModelConfig& model, PruningOptions options,
                             const FlashMetadata* metadata)
    : model_(model),
      options_(options),
      metadata_(metadata),
      costs_(compute_costs(model, options.reference_context)) {}

bool PruningPolicy::knows_domain(std::string_view domain) const {
  if (metadata_ == nullptr) return domain == "default";
  return metadata_->find(domain) != nullptr;
}

PlanDecision plan_request(const ModelConfig& model, const PruningOptions& options,
                          const ComputeCosts& costs, const GateMlp* gate, double ratio,
                          const Fingerprint& fp) {
  PlanDecision d;
  d.max_saved = ratio;
  ComputePlan plan = ComputePlan::full(model.n_layers, model.n_heads);
  plan.keep_kv_of_skipped = options.adaptive;
  const RuleOptions& rule = options.rule;
  if (rule.enabled && fp.prompt_tokens < rule.max_prompt_tokens &&
      fp.response_tokens < rule.max_response_tokens) {
    if (ffn_off_from_last(plan, rule_ffn_blocks(rule, model.n_layers), ratio, costs) > 0) {
      d.level = 1;
    }
  }
  if (gate != nullptr) {
    const ComputePlan before = plan;
    apply_gate(*gate, fp.features, ratio, costs, plan);
    if (!(plan == before)) d.level = 2;
  }
  if (plan.is_full()) return d;
  d.compute_saved = compute_saved(plan, costs);
  d.plan = std::make_shared<const ComputePlan>(std::move(plan));
  return d;
}

PlanDecision PruningPolicy::decide(const Fingerprint& fp, bool pruning_off) const {
  if (pruning_off) return PlanDecision{};
  const DomainGate* g = metadata_ != nullptr ? metadata_->find(fp.domain) : nullptr;
  const double ratio = g != nullptr ? g->entry.pruning_ratio : options_.default_ratio;
  const GateMlp* gate = g != nullptr && options_.gates_enabled ? &g->gate : nullptr;
  return plan_request(model_, options_, costs_, gate, ratio, fp);
}

}  // namespace k25
