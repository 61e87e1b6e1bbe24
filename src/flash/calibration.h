// R-PR4: offline calibration of the gated pruning (k25-convert). Per domain: what skipping each
// block's attention, each FFN and each head costs in quality on calibration text, a pruning plan
// per ratio from the cheapest units, a gate trained on per-chunk keep labels, and the quality of
// what the server then serves on held-out text (the Level 1 rule and the gate through
// plan_request, Level 3 through AdaptivePruner, all within the ratio): perplexity, greedy (top-1)
// agreement with the full model, and ROUGE-L of greedy generations against the text's real
// continuation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flash/adaptive_pruning.h"
#include "flash/gate.h"
#include "flash/pruning_levels.h"
#include "model/model.h"

namespace k25 {

// When a ratio passes: the served plans' quality on held-out text against the full model's. The
// defaults: perplexity at most +1% (stories260K: Q8_0 costs +0.1%, Q4_0 +7.2%), the full model's
// top-1 token at >= 98% of positions, ROUGE-L at most 0.5% lower (R-PR4's bound).
struct QualityBounds {
  double max_ppl_increase = 0.01;
  double min_agreement = 0.98;
  double max_rouge_drop = 0.005;
};

// Calibration chunks are requests as the server sees them: a prompt, a response length the
// request asks for and a priority, drawn (deterministically) over their serving ranges, so that
// every gate feature varies in training. A chunk scores the first min(response, gen_tokens)
// tokens of the text's real continuation.
struct CalibrationOptions {
  int chunk_tokens = 160;  // the longest chunk: BOS + prompt + scored response
  int max_chunks = 24;     // per part (calibration, held-out), evenly spread over the text
  int gen_tokens = 64;     // response tokens scored (and generated for ROUGE-L) per chunk at most
  int min_prompt_tokens = 4;
  int min_response_tokens = 8;      // requested response lengths: log-uniform in
  int max_response_tokens = 512;    // [min_response_tokens, max_response_tokens]
  double held_out_fraction = 0.25;  // the end of each domain's text
  QualityBounds bounds;
  std::vector<double> ratios = {0.01, 0.02, 0.05, 0.10, 0.20, 0.35, 0.50};  // table rows
  int gate_epochs = 400;
  // What the server runs (measured on held-out text): the Level 1 rule (on: what
  // rule_pruning "auto" does with calibrated metadata) and Level 3 within the ratio.
  PruningOptions serving = served_pruning();
  AdaptiveOptions adaptive;
  std::function<void(const std::string&)> progress;  // one line per step; may be empty

  static PruningOptions served_pruning() {
    PruningOptions p;
    p.rule.enabled = true;
    return p;
  }
};

struct Quality {
  double ppl = 0;            // over the scored response tokens
  double agreement = 1;      // share of scored positions whose argmax equals the full model's
  double rouge_l = 0;        // mean ROUGE-L F1 of greedy generations vs the real continuation
  double compute_saved = 0;  // mean share of per-token work skipped, prompt and response
};

struct UnitCost {
  enum class Kind { Attention, Ffn, Head } kind = Kind::Ffn;
  int layer = 0, head = 0;
  double compute_share = 0;  // of the full model's per-token work
  double damage = 0;         // mean relative NLL increase + top-1 disagreement, calibration part
  std::vector<double> chunk_damage;
  std::string name() const;
};

struct RatioRow {
  double ratio = 0;
  Quality quality;          // held-out, the plans the server serves with this ratio's gate
  double ppl_change = 0;    // relative to the full model
  double rouge_change = 0;  // relative to the full model (negative: worse)
  bool passes = false;      // within CalibrationOptions::bounds
  std::string failed;       // which bounds it misses ("PPL, agreement"), "" when it passes
  std::string plan;         // the calibration plan at this ratio (describe())
};

struct DomainCalibration {
  std::string name;
  double ratio = 0;  // the requested ratio
  std::vector<UnitCost> units;
  Quality full;                 // held-out quality of the full model
  std::vector<RatioRow> table;  // ascending ratios, the requested one included
  GateMlp gate;                 // trained for the requested ratio
  std::vector<uint64_t> signatures;
  bool passes = false;  // the requested ratio passes
  // The largest table ratio <= ratio such that it and every smaller one pass (0: none).
  double best_passing_ratio = 0;
};

// A calibration chunk: one request as the server would see it, and the real text after its prompt.
struct CalibrationRequest {
  std::vector<TokenId> tokens;  // BOS, prompt, scored response (the text's continuation)
  int prompt = 0;               // prompt tokens after the BOS
  int scored = 0;               // response tokens scored (and generated): min(response, gen_tokens)
  std::string prompt_text;      // the prompt tokens decoded
  Fingerprint fp;               // what the server builds for it (prompt and response lengths,
                                // priority, gate features); the domain is the caller's
};

// The held-out requests calibrate_domain measures for `text` (deterministic).
std::vector<CalibrationRequest> held_out_requests(const Tokenizer& tok, const std::string& text,
                                                  const CalibrationOptions& options);

// Throws k25::Error when the text is too short for one calibration and one held-out chunk.
DomainCalibration calibrate_domain(Model& model, ThreadPool& pool, const std::string& name,
                                   const std::string& text, double ratio,
                                   const CalibrationOptions& options);

// ROUGE-L F1 (longest common subsequence) of two token sequences; 1 when both are empty.
double rouge_l(const std::vector<TokenId>& candidate, const std::vector<TokenId>& reference);

// SimHash signatures of a text's paragraphs (blank-line separated), at most `max` of them.
std::vector<uint64_t> paragraph_signatures(const std::string& text, size_t max);

}  // namespace k25
