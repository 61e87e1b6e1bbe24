#include "engine/speculation.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

const char* speculative_mode_name(SpeculativeMode mode) {
  switch (mode) {
    case SpeculativeMode::kOff:
      return "off";
    case SpeculativeMode::kNgram:
      return "ngram";
    case SpeculativeMode::kSelf:
      return "self";
    case SpeculativeMode::kAuto:
      return "auto";
  }
  return "off";
}

std::optional<SpeculativeMode> parse_speculative_mode(std::string_view text) {
  for (SpeculativeMode mode : {SpeculativeMode::kOff, SpeculativeMode::kNgram,
                               SpeculativeMode::kSelf, SpeculativeMode::kAuto}) {
    if (text == speculative_mode_name(mode)) return mode;
  }
  return std::nullopt;
}

void validate(const SpeculationOptions& o) {
  if (o.max_batch < 0) fail("speculation: max_batch must be >= 0, not ", o.max_batch);
  if (o.min_draft < 1 || o.initial_draft < o.min_draft || o.max_draft < o.initial_draft) {
    fail("speculation: draft lengths need 1 <= min (", o.min_draft, ") <= initial (",
         o.initial_draft, ") <= max (", o.max_draft, ")");
  }
}

ComputePlan self_draft_plan(int n_layers, int n_heads) {
  ComputePlan plan = ComputePlan::full(n_layers, n_heads);
  const int n_off = std::clamp((n_layers + 2) / 4, 1, std::max(1, n_layers - 1));
  for (int l = n_layers - n_off; l < n_layers; ++l) {
    if (l == 0) continue;
    plan.set_attention(l, false);
    plan.set_ffn(l, false);
  }
  return plan;
}

DraftLength::DraftLength(const SpeculationOptions& options)
    : k_(options.initial_draft), min_(options.min_draft), max_(options.max_draft) {}

bool DraftLength::take_turn() {
  if (paused_left_ == 0) return true;
  --paused_left_;
  return false;
}

void DraftLength::observe(int drafted, int accepted) {
  if (drafted <= 0) return;
  k_ = accepted == drafted ? std::min(max_, k_ + 1) : std::max(min_, k_ - 1);
  if (accepted == 0) {
    pause_ = std::min(kMaxPause, pause_ == 0 ? 1 : 2 * pause_);
    paused_left_ = pause_;
  } else {
    pause_ = 0;
  }
}

}  // namespace k25
