// k25-run: generate text, measure perplexity, dump logits, tokenize, embed, measure batched
// decode and the cost of verifying drafts, from the command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/text_file.h"
#include "engine/batched_bench.h"
#include "engine/embedding_batch.h"
#include "engine/engine_generate.h"
#include "engine/verify_cost_bench.h"
#include "formats/gguf.h"
#include "kernels/kernel_table.h"
#include "model/generate.h"
#include "model/json_schema_grammar.h"
#include "model/model.h"
#include "model/perplexity.h"
#include "tokenizer/chat_prompt.h"

namespace {

using k25::TokenId;
using nlohmann::json;

constexpr const char* kKvDtypeHelp = "element type of the stored K and V rows: f32 or f16";

int default_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

// Text as JSON: invalid UTF-8 is replaced rather than aborting the dump.
json text_json(const std::string& text) {
  return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace));
}

// A prompt of n tokens for benchmarks: BOS (when used) then ordinary tokens spread over the vocab.
std::vector<TokenId> synthetic_prompt(const k25::Tokenizer& tok, int n) {
  std::vector<TokenId> ids;
  if (tok.bos() >= 0 && tok.vocab().add_bos) ids.push_back(tok.bos());
  for (int i = 0; static_cast<int>(ids.size()) < n; ++i) {
    ids.push_back(static_cast<TokenId>((1000 + i * 7919) % tok.n_vocab()));
  }
  return ids;
}

struct GenerateArgs {
  std::string model, prompt, prompt_file;
  int n_predict = 128, threads = default_threads(), n_prompt = 0;
  k25::SamplingParams sampling;
  uint64_t seed = 0;
  bool json_out = false, ignore_eos = false;
  std::vector<std::string> stop;
  std::string kv_dtype = "f32";
  std::string grammar_file, json_schema_file;  // constrained decoding
  std::string speculative;  // set: generate through the serving engine in this mode
};

int run_generate(const GenerateArgs& a, bool has_seed) {
  auto model = k25::Model::load(a.model);
  k25::ThreadPool pool(a.threads);
  const k25::Tokenizer& tok = model->tokenizer();
  std::vector<TokenId> prompt;
  if (a.n_prompt > 0) {
    prompt = synthetic_prompt(tok, a.n_prompt);
  } else {
    const std::string text =
        a.prompt_file.empty() ? a.prompt : k25::read_text_file(a.prompt_file, "--file");
    prompt = tok.encode(text, true, false);
  }
  k25::GenerateOptions options;
  options.n_predict = a.n_predict;
  options.sampling = a.sampling;
  if (has_seed) options.sampling.seed = a.seed;
  options.ignore_eos = a.ignore_eos;
  options.stop = a.stop;
  options.kv_dtype = k25::parse_kv_dtype(a.kv_dtype, "--kv-cache-dtype");
  if (!a.grammar_file.empty())
    options.grammar = k25::compile_gbnf(k25::read_text_file(a.grammar_file, "--grammar"));
  if (!a.json_schema_file.empty()) {
    nlohmann::ordered_json schema;
    try {
      schema =
          nlohmann::ordered_json::parse(k25::read_text_file(a.json_schema_file, "--json-schema"));
    } catch (const nlohmann::ordered_json::exception& e) {
      k25::fail(a.json_schema_file, ": not JSON: ", e.what());
    }
    options.grammar = k25::compile_json_schema(schema);
  }
  auto on_text = [&](const std::string& text) {
    if (!a.json_out) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
  };
  std::optional<k25::EngineGenerateResult> engine_run;
  if (!a.speculative.empty()) {
    const std::optional<k25::SpeculativeMode> mode = k25::parse_speculative_mode(a.speculative);
    if (!mode)
      k25::fail("--speculative: expected off, ngram, self or auto, got '", a.speculative, "'");
    engine_run = k25::generate_with_engine(*model, a.threads, prompt, options, *mode, on_text);
  }
  const k25::GenerateResult r =
      engine_run ? engine_run->result : k25::generate(*model, pool, prompt, options, on_text);
  if (a.json_out) {
    json out = {{"prompt_tokens", prompt},
                {"tokens", r.tokens},
                {"text", text_json(r.text)},
                {"finish_reason", r.finish_reason},
                {"tokens_per_second", r.decode_tokens_per_second()},
                {"prefill_tokens_per_second", r.prefill_tokens_per_second()},
                {"prefill_ms", r.prefill_ms},
                {"decode_ms", r.decode_ms},
                {"threads", a.threads},
                {"isa", k25::kernels().isa}};
    if (engine_run) {
      out["speculative"] = a.speculative;
      out["drafted_tokens"] = engine_run->drafted_tokens;
      out["accepted_tokens"] = engine_run->accepted_tokens;
      out["decode_forward_calls"] = engine_run->decode_forward_calls;
    }
    std::cout << out.dump() << "\n";
  } else {
    std::printf("\n");
  }
  std::fprintf(stderr,
               "prompt: %zu tokens, %.1f ms (%.2f tok/s); generated: %zu tokens (%.2f tok/s); "
               "kernel set %s\n",
               prompt.size(), r.prefill_ms, r.prefill_tokens_per_second(), r.tokens.size(),
               r.decode_tokens_per_second(), k25::kernels().isa);
  return 0;
}

int run_perplexity(const std::string& model_path, const std::string& file, int n_ctx, int threads,
                   k25::KvDtype kv_dtype) {
  auto model = k25::Model::load(model_path);
  k25::ThreadPool pool(threads);
  std::string text = k25::read_text_file(file, "perplexity text");
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama-perplexity reads -f
  const std::vector<TokenId> tokens = model->tokenizer().encode(text, true, false);
  std::fprintf(stderr, "perplexity: %zu tokens, %zu chunks of %d\n", tokens.size(),
               tokens.size() / n_ctx, n_ctx);
  k25::PerplexityResult r = k25::compute_perplexity(
      *model, tokens, n_ctx, pool,
      [](int k, double running) {
        std::printf("[%d]%.4f,", k + 1, running);
        std::fflush(stdout);
      },
      kv_dtype);
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.error);
  return 0;
}

int run_logits(const std::string& model_path, const std::string& prompt, int top, int threads,
               k25::KvDtype kv_dtype) {
  auto model = k25::Model::load(model_path);
  k25::ThreadPool pool(threads);
  const int n_vocab = model->config().n_vocab;
  const std::vector<TokenId> ids = model->tokenizer().encode(prompt, true, false);
  if (ids.empty()) k25::fail("the prompt has no tokens");
  std::vector<k25::BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i) batch.push_back({ids[i], static_cast<int>(i), 0, true});
  std::vector<float> logits(ids.size() * n_vocab);
  auto kv = model->make_kv_cache(kv_dtype);
  model->forward(batch, *kv, logits.data(), pool);
  json positions = json::array();
  top = std::clamp(top, 1, n_vocab);
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* row = logits.data() + i * n_vocab;
    std::vector<int> order(n_vocab);
    for (int v = 0; v < n_vocab; ++v) order[v] = v;
    std::partial_sort(order.begin(), order.begin() + top, order.end(),
                      [&](int x, int y) { return row[x] > row[y] || (row[x] == row[y] && x < y); });
    json best = json::array();
    for (int j = 0; j < top; ++j) best.push_back({order[j], row[order[j]]});
    positions.push_back({{"pos", i}, {"token", ids[i]}, {"top", best}});
  }
  std::cout << json{{"prompt_tokens", ids}, {"logits", positions}}.dump() << "\n";
  return 0;
}

int run_tokenize(const std::string& model_path, const std::string& prompt, bool no_bos,
                 bool parse_special) {
  std::unique_ptr<k25::Tokenizer> tok;
  namespace fs = std::filesystem;
  if (fs::is_directory(model_path)) {
    tok = k25::Tokenizer::from_hf_json((fs::path(model_path) / "tokenizer.json").string());
  } else if (model_path.ends_with(".json")) {
    tok = k25::Tokenizer::from_hf_json(model_path);
  } else {
    tok = k25::Tokenizer::from_gguf(*k25::GgufFile::open(model_path));
  }
  std::cout << json(tok->encode(prompt, !no_bos, parse_special)).dump() << "\n";
  return 0;
}

// The prompts' embeddings through the engine (one request each, batched), printed in
// OpenAI's /v1/embeddings shape.
int run_embed(const std::string& model_path, const std::vector<std::string>& prompts,
              const std::string& pooling_name, int threads, k25::KvDtype kv_dtype) {
  auto model = k25::Model::load(model_path);
  k25::Pooling pooling = model->config().pooling;
  if (!pooling_name.empty()) {
    std::optional<k25::Pooling> p = k25::parse_pooling(pooling_name);
    if (!p) k25::fail("--pooling: '", pooling_name, "' is not mean, cls or last");
    pooling = *p;
  }
  k25::EngineOptions options;
  options.n_threads = threads;
  options.kv_dtype = kv_dtype;
  options.max_batch_size = std::max<int>(1, static_cast<int>(prompts.size()));
  k25::Engine engine(*model, options);
  std::vector<std::vector<TokenId>> inputs;
  for (const std::string& p : prompts) inputs.push_back(model->tokenizer().encode(p, true, false));
  const std::vector<std::vector<float>> vectors = k25::embed_all(engine, inputs, pooling);
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vectors[i]}});
  }
  std::cout
      << json{{"object", "list"}, {"data", data}, {"pooling", k25::pooling_name(pooling)}}.dump()
      << "\n";
  return 0;
}

}  // namespace

// Issue 16's verify cost: a forward call of k + 1 positions against a decode step, and the decode
// speed-up that follows at a given per-token acceptance (n-gram drafts cost nothing to make).
int run_verify_cost(const std::string& model_path, int depth, int max_k, int reps, int threads,
                    k25::KvDtype kv_dtype, double acceptance, bool json_out) {
  auto model = k25::Model::load(model_path);
  k25::ThreadPool pool(threads);
  const std::vector<k25::VerifyCost> costs =
      k25::measure_verify_cost(*model, depth, max_k, reps, pool, kv_dtype);
  json rows = json::array();
  if (!json_out) {
    std::printf("isa %s, depth %d, %d threads, acceptance %.2f\n", k25::kernels().isa, depth,
                threads, acceptance);
    std::printf("| %2s | %9s | %9s | %16s | %9s |\n", "k", "ms", "x decode", "tokens / verify",
                "speed-up");
  }
  for (const k25::VerifyCost& c : costs) {
    const double tokens = k25::expected_tokens_per_verify(acceptance, c.k);
    const double speedup = tokens / c.vs_decode;
    if (json_out) {
      rows.push_back({{"k", c.k},
                      {"seconds", c.seconds},
                      {"vs_decode", c.vs_decode},
                      {"tokens_per_verify", tokens},
                      {"speedup", speedup}});
    } else {
      std::printf("| %2d | %9.2f | %9.2f | %16.2f | %9.2f |\n", c.k, 1000 * c.seconds, c.vs_decode,
                  tokens, speedup);
    }
  }
  if (json_out) {
    std::cout << json{{"isa", k25::kernels().isa}, {"depth", depth}, {"rows", rows}}.dump() << '\n';
  }
  return 0;
}

int run_batched_bench(const std::string& model_path, int n_prompt, int n_generate,
                      const std::vector<int>& n_parallel, int ubatch, int threads, int l1_window,
                      k25::KvDtype kv_dtype, bool json_out) {
  auto model = k25::Model::load(model_path);
  k25::ThreadPool pool(threads);
  if (!json_out) {
    std::printf("| %6s | %6s | %4s | %8s | %10s | %8s | %10s |", "PP", "TG", "B", "T_PP s",
                "S_PP t/s", "T_TG s", "S_TG t/s");
    if (l1_window > 0) std::printf(" %6s |", "L1 hit");
    std::printf("\n");
  }
  json rows = json::array();
  for (int pl : n_parallel) {
    const k25::BatchedBenchResult r = k25::run_batched_bench(
        *model, {n_prompt, n_generate, pl, l1_window, kv_dtype}, pool, ubatch);
    if (json_out) {
      rows.push_back({{"pp", n_prompt},
                      {"tg", n_generate},
                      {"pl", pl},
                      {"t_pp", r.prefill_s},
                      {"speed_pp", r.prefill_tokens_per_s()},
                      {"t_tg", r.decode_s},
                      {"speed_tg", r.decode_tokens_per_s()},
                      {"kv_cache_dtype", k25::to_string(kv_dtype)}});
      if (l1_window > 0) {
        rows.back()["l1_cache_size"] = l1_window;
        rows.back()["l1_hit_share"] = r.l1_hit_share;
      }
    } else {
      std::printf("| %6d | %6d | %4d | %8.3f | %10.2f | %8.3f | %10.2f |", n_prompt, n_generate, pl,
                  r.prefill_s, r.prefill_tokens_per_s(), r.decode_s, r.decode_tokens_per_s());
      if (l1_window > 0) std::printf(" %5.1f%% |", 100 * r.l1_hit_share);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (json_out) std::cout << rows.dump() << '\n';
  return 0;
}

struct RenderTemplateArgs {
  std::string template_file, conversation_file, bos_token, eos_token;
  bool add_generation_prompt = false;
  std::vector<std::string> vars;  // NAME=JSON
};

// Renders a chat template as transformers' apply_chat_template does; prints the text exactly.
int run_render_template(const RenderTemplateArgs& a) {
  using ojson = nlohmann::ordered_json;
  ojson conversation;
  try {
    conversation = ojson::parse(k25::read_text_file(a.conversation_file, "--conversation"));
  } catch (const ojson::exception& e) {
    k25::fail(a.conversation_file, ": not JSON: ", e.what());
  }
  if (!conversation.is_object() || !conversation.contains("messages") ||
      !conversation["messages"].is_array()) {
    k25::fail(a.conversation_file, ": expected an object with a \"messages\" array");
  }
  k25::ChatPromptInput input;
  input.messages = conversation["messages"];
  input.tools = conversation.value("tools", ojson());
  input.add_generation_prompt = a.add_generation_prompt;
  for (const std::string& var : a.vars) {
    const size_t eq = var.find('=');
    if (eq == std::string::npos || eq == 0) k25::fail("--var expects NAME=JSON, got '", var, "'");
    try {
      input.extra_vars[var.substr(0, eq)] = ojson::parse(var.substr(eq + 1));
    } catch (const ojson::exception&) {
      k25::fail("--var ", var.substr(0, eq), ": the value is not JSON");
    }
  }
  const k25::ChatPromptTemplate tmpl(k25::read_text_file(a.template_file, "--template"),
                                     a.bos_token, a.eos_token);
  const std::string text = tmpl.render(input).text;
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

int main(int argc, char** argv) {
  CLI::App app{"k25-run: run a model from the command line"};
  app.require_subcommand(1);

  GenerateArgs g;
  auto* gen = app.add_subcommand("generate", "generate a continuation of a prompt");
  gen->add_option("-m,--model", g.model, "GGUF file or Hugging Face directory")->required();
  gen->add_option("-p,--prompt", g.prompt, "prompt text");
  gen->add_option("-f,--file", g.prompt_file, "read the prompt from a file");
  gen->add_option("--n-prompt", g.n_prompt, "use a synthetic prompt of N tokens (benchmarks)");
  gen->add_option("-n,--n-predict", g.n_predict, "tokens to generate")->capture_default_str();
  gen->add_option("--temp", g.sampling.temperature, "temperature; 0 = greedy")
      ->capture_default_str();
  gen->add_option("--top-k", g.sampling.top_k, "top-k; 0 = off")->capture_default_str();
  gen->add_option("--top-p", g.sampling.top_p, "top-p; 1 = off")->capture_default_str();
  gen->add_option("--min-p", g.sampling.min_p, "min-p; 0 = off")->capture_default_str();
  gen->add_option("--repeat-penalty", g.sampling.repeat_penalty, "1 = off")->capture_default_str();
  gen->add_option("--repeat-last-n", g.sampling.repeat_last_n)->capture_default_str();
  auto* seed_opt = gen->add_option("--seed", g.seed, "RNG seed (default: random)");
  gen->add_option("--stop", g.stop, "stop string (repeatable)");
  gen->add_option("-t,--threads", g.threads)->capture_default_str();
  gen->add_flag("--json", g.json_out, "print one JSON object");
  gen->add_flag("--ignore-eos", g.ignore_eos, "do not stop at end-of-generation tokens");
  gen->add_option(
      "--speculative", g.speculative,
      "run through the serving engine with speculative decoding off, ngram, self or auto");
  gen->add_option("--kv-cache-dtype", g.kv_dtype, kKvDtypeHelp)->capture_default_str();
  auto* grammar_opt =
      gen->add_option("--grammar", g.grammar_file, "constrain the output to a GBNF grammar file");
  gen->add_option("--json-schema", g.json_schema_file, "constrain the output to a JSON schema file")
      ->excludes(grammar_opt);

  std::string model, text, file;
  int n_ctx = 512, threads = default_threads(), top = 8;
  bool no_bos = false, parse_special = false;
  auto* ppl =
      app.add_subcommand("perplexity", "perplexity of a text file (llama-perplexity method)");
  ppl->add_option("-m,--model", model)->required();
  ppl->add_option("-f,--file", file)->required();
  ppl->add_option("-c,--ctx-size", n_ctx)->capture_default_str();
  ppl->add_option("-t,--threads", threads)->capture_default_str();
  std::string kv_dtype = "f32";
  ppl->add_option("--kv-cache-dtype", kv_dtype, kKvDtypeHelp)->capture_default_str();

  auto* lg = app.add_subcommand("logits", "top-K logits at every prompt position, as JSON");
  lg->add_option("-m,--model", model)->required();
  lg->add_option("-p,--prompt", text)->required();
  lg->add_option("--top", top)->capture_default_str();
  lg->add_option("-t,--threads", threads)->capture_default_str();
  lg->add_option("--kv-cache-dtype", kv_dtype, kKvDtypeHelp)->capture_default_str();

  auto* tk = app.add_subcommand("tokenize", "token ids of a text as a JSON array");
  tk->add_option("-m,--model", model, "GGUF (vocab-only is fine), HF directory or tokenizer.json")
      ->required();
  tk->add_option("-p,--prompt", text)->required();
  tk->add_flag("--no-bos", no_bos, "do not add BOS/EOS");
  tk->add_flag("--parse-special", parse_special, "map special-token text to special tokens");

  std::vector<std::string> embed_prompts;
  std::string pooling;
  auto* em = app.add_subcommand(
      "embed", "pooled, L2-normalised final hidden state of each prompt, as /v1/embeddings JSON");
  em->add_option("-m,--model", model)->required();
  em->add_option("-p,--prompt", embed_prompts, "text to embed (repeatable)")->required();
  em->add_option("--pooling", pooling, "mean, cls or last (default: the model's, else mean)");
  em->add_option("-t,--threads", threads)->capture_default_str();
  em->add_option("--kv-cache-dtype", kv_dtype, kKvDtypeHelp)->capture_default_str();

  int n_prompt = 128, n_generate = 128;
  std::vector<int> n_parallel = {1, 4, 8, 16, 24};
  int ubatch = 2048, l1_window = 0;
  bool bench_json = false;
  auto* bb = app.add_subcommand(
      "batched-bench", "prefill and batched-decode throughput (llama-batched-bench's method)");
  bb->add_option("-m,--model", model)->required();
  bb->add_option("--npp", n_prompt, "prompt tokens per sequence")->capture_default_str();
  bb->add_option("--ntg", n_generate, "generated tokens per sequence")->capture_default_str();
  bb->add_option("--npl", n_parallel, "parallel sequences (comma-separated list)")
      ->delimiter(',')
      ->capture_default_str();
  bb->add_option("--ubatch", ubatch, "most tokens per prefill forward call (micro-task size)")
      ->capture_default_str();
  bb->add_option("-t,--threads", threads)->capture_default_str();
  bb->add_option("--l1-cache-size", l1_window,
                 "L1 KV window: newest positions per sequence read from a ring; 0 = no L1")
      ->capture_default_str();
  bb->add_option("--kv-cache-dtype", kv_dtype, kKvDtypeHelp)->capture_default_str();
  bb->add_flag("--json", bench_json, "print one JSON array");

  int depth = 256, max_k = 8, reps = 5;
  double acceptance = 0.38;
  auto* vc = app.add_subcommand(
      "verify-cost", "cost of verifying k drafted tokens against a decode step (speculation)");
  vc->add_option("-m,--model", model)->required();
  vc->add_option("--depth", depth, "positions of context before the draft")->capture_default_str();
  vc->add_option("--max-k", max_k, "largest draft measured")->capture_default_str();
  vc->add_option("--reps", reps, "calls per k (the median is kept)")->capture_default_str();
  vc->add_option("--acceptance", acceptance,
                 "per-token draft acceptance for the projected speed-up")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  vc->add_option("-t,--threads", threads)->capture_default_str();
  vc->add_option("--kv-cache-dtype", kv_dtype, kKvDtypeHelp)->capture_default_str();
  vc->add_flag("--json", bench_json, "print one JSON object");

  RenderTemplateArgs rt;
  auto* rtc = app.add_subcommand("render-template",
                                 "render a chat template for a conversation (apply_chat_template)");
  rtc->add_option("--template", rt.template_file, "Jinja chat template file")->required();
  rtc->add_option("--conversation", rt.conversation_file,
                  "JSON object with \"messages\" and optionally \"tools\"")
      ->required();
  rtc->add_flag("--add-generation-prompt", rt.add_generation_prompt);
  rtc->add_option("--bos-token", rt.bos_token, "the bos_token variable")->capture_default_str();
  rtc->add_option("--eos-token", rt.eos_token, "the eos_token variable")->capture_default_str();
  rtc->add_option("--var", rt.vars, "extra variable NAME=JSON (repeatable)");

  CLI11_PARSE(app, argc, argv);
  try {
    k25::kernels();  // first: a K25_ISA the CPU cannot run is one error line
    if (*rtc) return run_render_template(rt);
    if (*gen) {
      if (g.prompt.empty() && g.prompt_file.empty() && g.n_prompt <= 0) {
        k25::fail("generate needs -p PROMPT, -f FILE or --n-prompt N");
      }
      if (g.threads < 1) k25::fail("--threads must be at least 1");
      return run_generate(g, seed_opt->count() > 0);
    }
    if (threads < 1) k25::fail("--threads must be at least 1");
    const k25::KvDtype dtype = k25::parse_kv_dtype(kv_dtype, "--kv-cache-dtype");
    if (*ppl) return run_perplexity(model, file, n_ctx, threads, dtype);
    if (*lg) return run_logits(model, text, top, threads, dtype);
    if (*tk) return run_tokenize(model, text, no_bos, parse_special);
    if (*em) return run_embed(model, embed_prompts, pooling, threads, dtype);
    if (*vc)
      return run_verify_cost(model, depth, max_k, reps, threads, dtype, acceptance, bench_json);
    if (*bb)
      return run_batched_bench(model, n_prompt, n_generate, n_parallel, ubatch, threads, l1_window,
                               dtype, bench_json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
