// Speculative decoding in the engine (issue 16, the lossless part): a drafter (flash/
// ngram_drafter.h) proposes k tokens after a decoding sequence's last token; the step's forward
// call computes the last token and the k drafted ones together, with logits for each of the k+1
// positions; the engine samples each row in turn, exactly as it would sample one token per
// step, while the sampled token equals the draft's next one. So a verify step yields 1..k+1
// tokens and they are the tokens decoding one at a time gives (greedy: token for token; sampled:
// the same sampler calls on the same logits, so the same distribution and, with a seed, the same
// tokens). The KV rows of the rejected draft tail are rolled back (positions, and pages that hold
// no kept position).
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "flash/ngram_drafter.h"
#include "model/compute_plan.h"

namespace k25 {

// A request's "speculative" field. kNgram: prompt lookup. kSelf: the model under a pruned plan
// drafts (the request's own plan, whose tokens the full model then verifies, or the engine's
// draft plan: see self_draft_plan). kAuto: the engine picks the drafter; today that is the
// n-gram one.
enum class SpeculativeMode { kOff, kNgram, kSelf, kAuto };
const char* speculative_mode_name(SpeculativeMode mode);
// "off", "ngram", "auto"; nullopt for anything else (callers name the problem).
std::optional<SpeculativeMode> parse_speculative_mode(std::string_view text);

struct SpeculationOptions {
  // A step with more decoding sequences than this drafts nothing: a large decode batch already
  // uses the compute that verifying drafts would take.
  int max_batch = 4;
  int initial_draft = 4;  // k of a request's first draft
  int min_draft = 1;
  int max_draft = 8;
  // Testing aid: drafts instead of the n-gram drafter (e.g. always wrong ones). Null: n-gram.
  std::shared_ptr<const Drafter> drafter;
};

// Throws k25::Error unless 0 <= max_batch and 1 <= min_draft <= initial_draft <= max_draft.
void validate(const SpeculationOptions& options);

// The plan self-speculation drafts with when the request has none: the attention (K/V kept) and
// the FFN of the last quarter of the blocks switched off (at least one block, never block 0).
ComputePlan self_draft_plan(int n_layers, int n_heads);

// k per request, from its measured acceptance: one more after a fully accepted draft, one less
// after one with a rejection. A draft of which nothing was accepted also pauses drafting for 1,
// 2, 4, ... up to kMaxPause decode steps (doubling while they keep failing): a verify step costs
// more than a decode step, so text the drafter cannot predict should not pay for it every step.
class DraftLength {
 public:
  static constexpr int kMaxPause = 16;
  explicit DraftLength(const SpeculationOptions& options);
  int next() const { return k_; }
  // Whether this decode step drafts; counts the paused steps down.
  bool take_turn();
  void observe(int drafted, int accepted);

 private:
  int k_, min_, max_;
  int pause_ = 0;        // next pause after a failed draft (0: none yet)
  int paused_left_ = 0;  // decode steps still without a draft
};

}  // namespace k25
