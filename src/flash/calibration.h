// R-PR4: offline calibration of the gated pruning (k25-convert). Per domain: what skipping each
// block's attention, each FFN and each head costs in quality on calibration text, a pruning plan
// per ratio from the cheapest units, a gate trained on per-chunk keep labels, and the quality of
// the resulting runtime decisions on held-out text: perplexity, greedy (top-1) agreement with the
// full model, and ROUGE-L of greedy generations against the text's real continuation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flash/gate.h"
#include "flash/pruning_levels.h"
#include "model/model.h"

namespace k25 {

struct CalibrationOptions {
  int chunk_tokens = 64;   // tokens per chunk (the first replaced by BOS)
  int max_chunks = 24;     // per part (calibration, held-out), evenly spread over the text
  int prompt_tokens = 16;  // generations start after this many tokens of the chunk
  int gen_tokens = 24;     // greedy tokens generated (ROUGE-L against the next real tokens)
  double held_out_fraction = 0.25;  // the end of each domain's text
  double rouge_tolerance = 0.005;   // a ratio passes when ROUGE-L drops by at most 0.5%
  std::vector<double> ratios = {0.05, 0.10, 0.20, 0.35, 0.50};  // table rows (plus the chosen)
  int gate_epochs = 400;
  int reference_context = 256;                       // as PruningOptions::reference_context
  std::function<void(const std::string&)> progress;  // one line per step; may be empty
};

struct Quality {
  double ppl = 0;
  double agreement = 1;  // share of positions whose argmax equals the full model's
  double rouge_l = 0;    // mean ROUGE-L F1 of generations vs the real continuation
  double compute_saved = 0;
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
  Quality quality;          // held-out, runtime decisions of the gate trained for this ratio
  double ppl_change = 0;    // relative to the full model
  double rouge_change = 0;  // relative to the full model (negative: worse)
  bool passes = false;
  std::string plan;  // the calibration plan at this ratio (describe())
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

// Throws k25::Error when the text is too short for one calibration and one held-out chunk.
DomainCalibration calibrate_domain(Model& model, ThreadPool& pool, const std::string& name,
                                   const std::string& text, double ratio,
                                   const CalibrationOptions& options);

// ROUGE-L F1 (longest common subsequence) of two token sequences; 1 when both are empty.
double rouge_l(const std::vector<TokenId>& candidate, const std::vector<TokenId>& reference);

// SimHash signatures of a text's paragraphs (blank-line separated), at most `max` of them.
std::vector<uint64_t> paragraph_signatures(const std::string& text, size_t max);

}  // namespace k25
