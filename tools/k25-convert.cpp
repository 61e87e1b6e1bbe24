// k25-convert (R-M3): a Hugging Face directory or a GGUF file → a k25 model directory
// (config.json with k25_config, model.gguf in the requested --outtype, k25_metadata/) and, with
// --enable-gated-pruning, calibrates the domain gates on the given text, printing the held-out
// quality table. Exit 2 when the pruning ratio costs too much quality.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "core/error.h"
#include "flash/convert.h"

int main(int argc, char** argv) {
  k25::ConvertOptions o;
  std::vector<std::string> calibration, domain_ratios;
  CLI::App app("k25-convert: a model → one GGUF file and the k25 layout, with calibrated gates");
  app.add_option("--model-path", o.model_path, "input GGUF file or Hugging Face directory")
      ->required();
  app.add_option("--output-path", o.output_path, "output directory")->required();
  app.add_option("--outtype", o.outtype,
                 "f32, f16, bf16, q8_0, q4_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m or q6_k "
                 "(default: the input's type)");
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "KV cache dtype recorded in k25_config")
      ->capture_default_str();
  app.add_flag("--enable-gated-pruning", o.enable_gated_pruning, "calibrate the domain gates");
  app.add_option("--pruning-ratio", o.pruning_ratio, "share of compute the gates may switch off")
      ->capture_default_str();
  app.add_option("--calibration", calibration, "DOMAIN=FILE calibration text (repeatable)");
  app.add_option("--domain-ratio", domain_ratios, "DOMAIN=RATIO per-domain override (repeatable)");
  app.add_option("--threads", o.threads, "threads of the calibration forward passes")
      ->capture_default_str();
  app.add_option("--chunk-tokens", o.calib.chunk_tokens,
                 "longest calibration chunk (BOS, prompt, scored response)")
      ->capture_default_str();
  app.add_option("--max-chunks", o.calib.max_chunks, "chunks per part (calibration, held-out)")
      ->capture_default_str();
  app.add_option("--gen-tokens", o.calib.gen_tokens,
                 "response tokens scored and generated per chunk at most")
      ->capture_default_str();
  app.add_option("--held-out", o.calib.held_out_fraction, "share of each text held out")
      ->capture_default_str();
  app.add_option("--max-ppl-increase", o.calib.bounds.max_ppl_increase,
                 "a ratio passes with held-out perplexity at most this much higher")
      ->capture_default_str();
  app.add_option("--min-agreement", o.calib.bounds.min_agreement,
                 "... the full model's top-1 token at least at this share of positions")
      ->capture_default_str();
  app.add_option("--max-rouge-drop", o.calib.bounds.max_rouge_drop,
                 "... and ROUGE-L at most this much lower")
      ->capture_default_str();
  bool no_rule = false, no_adaptive = false;
  app.add_flag("--rule-pruning-off", no_rule,
               "measure plans without the Level 1 rule (a server run with rule_pruning: off)");
  app.add_flag("--adaptive-pruning-off", no_adaptive,
               "measure plans without Level 3 (a server run with --disable-adaptive-pruning)");
  CLI11_PARSE(app, argc, argv);
  o.calib.serving.rule.enabled = !no_rule;
  o.calib.serving.adaptive = !no_adaptive;
  o.progress = &std::cerr;
  o.progress_interactive = isatty(STDERR_FILENO) != 0;
  try {
    for (const std::string& arg : calibration)
      o.calibration.push_back(k25::parse_calibration_arg(arg));
    for (const std::string& arg : domain_ratios) {
      auto [domain, value] = k25::parse_calibration_arg(arg);
      char* end = nullptr;
      const double r = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(r >= 0 && r <= 0.9))
        k25::fail("--domain-ratio: bad ratio '", value, "'");
      o.domain_ratios.emplace_back(domain, r);
    }
    return k25::run_convert(o, std::cout);
  } catch (const std::exception& e) {
    std::cerr << "k25-convert: " << e.what() << "\n";
    return 1;
  }
}
