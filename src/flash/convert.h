// k25-convert (R-M3): a model (GGUF file or Hugging Face directory) → the note's layout
//   OUT/config.json        the model's configuration plus a "k25_config" section
//   OUT/model.gguf         the GGUF weights in the requested outtype (model/gguf_convert.h),
//                          with the calibrated gates inside as k25.flash.* keys
//   OUT/k25_metadata/domain_map.json, OUT/k25_metadata/<domain>_gate.bin
// with gated pruning calibrated per domain (flash/calibration.h) on the input model.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "flash/calibration.h"

namespace k25 {

struct ConvertOptions {
  std::string model_path;
  std::string output_path;
  std::string outtype;  // f16, q4_k_m, ... (model/quant_mixture.h); empty: the input's type
  std::string kv_cache_dtype = "f16";  // recorded in k25_config (f32, f16, bf16, q8_0)
  bool enable_gated_pruning = false;
  double pruning_ratio = 0.35;
  std::vector<std::pair<std::string, std::string>> calibration;  // (domain, text file)
  std::vector<std::pair<std::string, double>> domain_ratios;     // per-domain overrides
  int threads = 2;
  CalibrationOptions calib;
  std::ostream* progress = nullptr;  // the conversion's progress bar and final line
  bool progress_interactive = false;
};

// Returns the exit status: 0 written; 2 refused (a ratio whose served plans miss the quality
// bounds, CalibrationOptions::bounds, on held-out text: nothing is written, the message names a
// ratio that passes). Progress and the
// quality table go to `out`. Throws k25::Error on bad input or I/O failure.
int run_convert(const ConvertOptions& options, std::ostream& out);

// "DOMAIN=FILE" → (domain, file); throws k25::Error naming the argument.
std::pair<std::string, std::string> parse_calibration_arg(const std::string& arg);

}  // namespace k25
