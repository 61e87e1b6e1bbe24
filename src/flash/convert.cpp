#include "flash/convert.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/text_file.h"
#include "core/thread_pool.h"
#include "flash/domain_map.h"
#include "flash/flash_metadata.h"
#include "flash/gate.h"
#include "model/gguf_convert.h"

namespace k25 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The configuration of the written GGUF file, under Hugging Face's key names.
json gguf_config_json(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  const std::string p = arch + ".";
  return {{"architecture", arch},
          {"name", f.get_string_or("general.name", arch)},
          {"vocab_size", f.get_string_array("tokenizer.ggml.tokens").size()},
          {"hidden_size", f.get_int(p + "embedding_length")},
          {"num_hidden_layers", f.get_int(p + "block_count")},
          {"num_attention_heads", f.get_int(p + "attention.head_count")},
          {"num_key_value_heads", f.get_int_or(p + "attention.head_count_kv", 0)},
          {"intermediate_size", f.get_int(p + "feed_forward_length")},
          {"max_position_embeddings", f.get_int_or(p + "context_length", 2048)},
          {"rope_theta", f.get_float_or(p + "rope.freq_base", 10000.0)},
          {"rms_norm_eps", f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5)}};
}

std::string fmt(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string pct(double v) {
  return (v >= 0 ? "+" : "") + fmt(100 * v, 2) + "%";
}

void print_table(const DomainCalibration& d, const QualityBounds& b, std::ostream& out) {
  out << "\n"
      << d.name << ": held-out quality of the served plans (full model: PPL " << fmt(d.full.ppl, 3)
      << ", ROUGE-L " << fmt(d.full.rouge_l, 4)
      << "); a ratio passes with PPL change <= " << pct(b.max_ppl_increase)
      << ", greedy agreement >= " << fmt(100 * b.min_agreement, 1)
      << "%, ROUGE-L change >= " << pct(-b.max_rouge_drop) << "\n"
      << "| ratio | compute saved | PPL | PPL change | greedy agreement | ROUGE-L | ROUGE-L change "
         "| passes | calibration plan |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  for (const RatioRow& r : d.table) {
    out << "| " << fmt(r.ratio, 2) << " | " << fmt(100 * r.quality.compute_saved, 1) << "% | "
        << fmt(r.quality.ppl, 3) << " | " << pct(r.ppl_change) << " | "
        << fmt(100 * r.quality.agreement, 1) << "% | " << fmt(r.quality.rouge_l, 4) << " | "
        << pct(r.rouge_change) << " | " << (r.passes ? "yes" : "no: " + r.failed) << " | " << r.plan
        << " |\n";
  }
}

const RatioRow& requested_row(const DomainCalibration& d) {
  for (const RatioRow& r : d.table) {
    if (std::abs(r.ratio - d.ratio) < 1e-9) return r;
  }
  fail("calibration table of '", d.name, "' lacks the requested ratio");
}

}  // namespace

std::pair<std::string, std::string> parse_calibration_arg(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size()) {
    fail("--calibration: expected DOMAIN=FILE, got '", arg, "'");
  }
  std::string domain = arg.substr(0, eq);
  if (!is_valid_domain_name(domain)) {
    fail("--calibration: domain '", domain, "' is not 1-64 characters of [A-Za-z0-9_.-]");
  }
  return {std::move(domain), arg.substr(eq + 1)};
}

int run_convert(const ConvertOptions& o, std::ostream& out) {
  if (o.model_path.empty()) fail("--model-path is required");
  if (o.output_path.empty()) fail("--output-path is required");
  if (o.kv_cache_dtype != "f32" && o.kv_cache_dtype != "f16" && o.kv_cache_dtype != "bf16" &&
      o.kv_cache_dtype != "q8_0") {
    fail("--kv-cache-dtype: '", o.kv_cache_dtype, "' is not f32, f16, bf16 or q8_0");
  }
  if (!(o.pruning_ratio >= 0 && o.pruning_ratio <= 0.9)) {
    fail("--pruning-ratio: ", o.pruning_ratio, " is outside [0, 0.9]");
  }
  if (o.enable_gated_pruning && o.calibration.empty()) {
    fail("--enable-gated-pruning needs at least one --calibration DOMAIN=FILE");
  }
  GgufConvertOptions gguf;
  gguf.input = o.model_path;
  if (!o.outtype.empty()) gguf.outtype = parse_outtype(o.outtype);
  gguf.progress = o.progress;
  gguf.progress_interactive = o.progress_interactive;
  gguf.threads = std::max(1, o.threads);
  const bool hf_input = fs::is_directory(o.model_path);
  if (!hf_input && !fs::exists(o.model_path)) fail(o.model_path, ": no such file or directory");

  // Calibrate before writing anything: a refused ratio leaves no output behind.
  std::vector<DomainCalibration> domains;
  if (o.enable_gated_pruning) {
    out << "loading " << o.model_path << "\n" << std::flush;
    std::unique_ptr<Model> model = Model::load(o.model_path);
    ThreadPool pool(std::max(1, o.threads));
    CalibrationOptions calib = o.calib;
    calib.progress = [&out](const std::string& line) { out << "  " << line << "\n" << std::flush; };
    std::vector<std::pair<std::string, std::string>> sets = o.calibration;
    bool has_default = false;
    std::string all_text;
    for (const auto& [name, file] : sets) {
      has_default = has_default || name == "default";
      all_text += read_text_file(file, "calibration text") + "\n\n";
    }
    for (const auto& [name, file] : sets) {
      double ratio = o.pruning_ratio;
      for (const auto& [d, r] : o.domain_ratios) {
        if (d == name) ratio = r;
      }
      out << "calibrating domain '" << name << "' on " << file << " (ratio " << fmt(ratio, 2)
          << ")\n";
      domains.push_back(calibrate_domain(*model, pool, name,
                                         read_text_file(file, "calibration text"), ratio, calib));
    }
    if (!has_default) {
      if (sets.size() == 1) {
        // The one domain's calibration serves as the default template too.
        DomainCalibration d = domains.front();
        d.name = "default";
        d.signatures.clear();
        domains.push_back(std::move(d));
      } else {
        out << "calibrating domain 'default' on all calibration text\n";
        domains.push_back(
            calibrate_domain(*model, pool, "default", all_text, o.pruning_ratio, calib));
        domains.back().signatures.clear();
      }
    }
    bool refused = false;
    for (const DomainCalibration& d : domains) {
      print_table(d, o.calib.bounds, out);
      if (!d.passes) {
        refused = true;
        const RatioRow& r = requested_row(d);
        out << "REFUSED: domain '" << d.name << "': pruning ratio " << fmt(d.ratio, 2)
            << " misses the quality bounds on held-out text (" << r.failed << "): PPL "
            << pct(r.ppl_change) << ", greedy agreement " << fmt(100 * r.quality.agreement, 1)
            << "%, ROUGE-L " << pct(r.rouge_change) << "; ";
        if (d.best_passing_ratio > 0) {
          out << "ratio " << fmt(d.best_passing_ratio, 2) << " passes\n";
        } else {
          out << "no tested ratio above 0 passes (use --pruning-ratio 0)\n";
        }
      }
    }
    if (refused) {
      out << "nothing written\n";
      return 2;
    }
  }

  const fs::path dir(o.output_path);
  const bool new_dir = !fs::exists(dir);
  fs::create_directories(dir);
  std::vector<DomainEntry> entries;
  std::vector<const GateMlp*> gates;
  for (const DomainCalibration& d : domains) {
    entries.push_back({d.name, d.name + "_gate.bin", d.ratio, d.signatures});
    gates.push_back(&d.gate);
  }
  if (!entries.empty()) gguf.extra_metadata = flash_gguf_metadata(entries, gates);
  gguf.output = (dir / "model.gguf").string();
  out << "writing " << gguf.output << "\n" << std::flush;
  GgufConvertResult written;
  try {
    written = convert_to_gguf(gguf);
  } catch (const Error&) {
    if (new_dir) fs::remove_all(dir);  // a refused conversion leaves nothing behind
    throw;
  }
  out << "wrote " << written.n_tensors << " tensors (" << written.outtype << ")\n";

  json config;
  if (hf_input) {
    std::ifstream in(fs::path(o.model_path) / "config.json");
    config = json::parse(in, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      fail(o.model_path, "/config.json: not a JSON object");
    }
  } else {
    config = gguf_config_json(*GgufFile::open(gguf.output));
  }
  json k25 = {{"version", 1},
              {"source_model", o.model_path},
              {"outtype", written.outtype},
              {"kv_cache_dtype", o.kv_cache_dtype},
              {"gated_pruning", o.enable_gated_pruning},
              {"pruning_ratio", o.pruning_ratio}};
  if (o.enable_gated_pruning) {
    const fs::path meta = dir / "k25_metadata";
    fs::create_directories(meta);
    json quality = json::object();
    for (size_t i = 0; i < domains.size(); ++i) {
      const DomainCalibration& d = domains[i];
      save_gate_file(d.gate, (meta / entries[i].gate_file).string());
      json rows = json::array();
      for (const RatioRow& r : d.table) {
        rows.push_back({{"ratio", r.ratio},
                        {"compute_saved", r.quality.compute_saved},
                        {"ppl", r.quality.ppl},
                        {"ppl_change", r.ppl_change},
                        {"greedy_agreement", r.quality.agreement},
                        {"rouge_l", r.quality.rouge_l},
                        {"rouge_l_change", r.rouge_change},
                        {"passes", r.passes}});
      }
      quality[d.name] = {{"bounds",
                          {{"max_ppl_increase", o.calib.bounds.max_ppl_increase},
                           {"min_greedy_agreement", o.calib.bounds.min_agreement},
                           {"max_rouge_l_drop", o.calib.bounds.max_rouge_drop}}},
                         {"full_ppl", d.full.ppl},
                         {"full_rouge_l", d.full.rouge_l},
                         {"table", rows},
                         {"gate_parameters", d.gate.n_parameters()}};
    }
    std::ofstream map(meta / "domain_map.json");
    map << domain_map_json(entries);
    if (!map) fail((meta / "domain_map.json").string(), ": cannot write");
    k25["domains"] = quality;
    out << "wrote " << entries.size() << " gates to " << meta.string() << "\n";
  }
  config["k25_config"] = k25;
  std::ofstream cfg(dir / "config.json");
  cfg << config.dump(2) << "\n";
  if (!cfg) fail((dir / "config.json").string(), ": cannot write");
  out << "done: " << dir.string() << "\n";
  return 0;
}

}  // namespace k25
