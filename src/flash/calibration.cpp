#include "flash/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/bits.h"
#include "core/error.h"
#include "flash/fingerprint.h"
#include "flash/simhash.h"
#include "model/perplexity.h"

namespace k25 {

namespace {

struct ChunkEval {
  double nll = 0;               // mean over the scored response tokens
  std::vector<TokenId> argmax;  // at the scored positions
  std::vector<TokenId> generated;
  double compute_saved = 0;  // mean over every position computed (teacher-forced run)
};

// How a chunk runs: a fixed plan (null: the full model) or, with `adaptive`, what the engine does
// with a pruned request: Level 3 decisions every interval within max_saved.
struct ChunkPlan {
  std::shared_ptr<const ComputePlan> plan;
  bool adaptive = false;
  double max_saved = 0;
};

TokenId argmax_of(const float* logits, int n) {
  return static_cast<TokenId>(std::max_element(logits, logits + n) - logits);
}

// Deterministic draws for chunk `i` of a part (`salt` tells the parts apart).
double uniform01(uint64_t salt, int i, int k) {
  const uint64_t x = splitmix64(salt * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 8 + k);
  return static_cast<double>(x >> 11) / 9007199254740992.0;
}

int log_uniform(double u, int lo, int hi) {
  if (hi <= lo) return lo;
  const double v = std::exp(std::log(lo) + u * (std::log(hi + 1.0) - std::log(lo)));
  return std::clamp(static_cast<int>(v), lo, hi);
}

// Up to max_chunks requests, their lengths drawn first, then laid one after another with equal
// gaps so that they spread over the whole text.
std::vector<CalibrationRequest> make_requests(const Tokenizer& tok, const std::vector<TokenId>& ids,
                                              uint64_t salt, const CalibrationOptions& o) {
  const int body = o.chunk_tokens - 1;  // after the BOS
  std::vector<CalibrationRequest> out;
  size_t used = 0;
  for (int i = 0; i < o.max_chunks; ++i) {
    const int response =
        log_uniform(uniform01(salt, i, 0), o.min_response_tokens, o.max_response_tokens);
    CalibrationRequest c;
    c.scored = std::min(response, o.gen_tokens);
    c.prompt = log_uniform(uniform01(salt, i, 1), o.min_prompt_tokens, body - c.scored);
    if (used + c.prompt + c.scored > ids.size()) break;
    used += c.prompt + c.scored;
    c.fp.response_tokens = response;
    c.fp.priority = static_cast<int>(uniform01(salt, i, 2) * 101);
    out.push_back(std::move(c));
  }
  const size_t gap = out.empty() ? 0 : (ids.size() - used) / out.size();
  size_t start = 0;
  for (CalibrationRequest& c : out) {
    c.tokens.push_back(tok.bos());
    c.tokens.insert(c.tokens.end(), ids.begin() + start, ids.begin() + start + c.prompt + c.scored);
    start += c.prompt + c.scored + gap;
    const std::vector<TokenId> prompt(c.tokens.begin() + 1, c.tokens.begin() + 1 + c.prompt);
    c.prompt_text = tok.decode(prompt, false);
    c.fp.prompt_tokens = c.prompt + 1;
    c.fp.features =
        gate_features(c.prompt_text, c.fp.prompt_tokens, c.fp.response_tokens, c.fp.priority);
  }
  return out;
}

// Runs `tokens[from, to)` (positions from..to-1) under the plan, logits for the rows from `first`
// on; returns the logits rows.
std::vector<float> run_span(Model& model, ThreadPool& pool, KvCache& kv,
                            const std::vector<TokenId>& tokens, int from, int to, int first,
                            const ComputePlan* plan) {
  std::vector<BatchToken> batch;
  for (int i = from; i < to; ++i) batch.push_back({tokens[i], i, 0, i >= first});
  std::vector<float> logits(static_cast<size_t>(to - std::max(from, first)) *
                            model.config().n_vocab);
  model.forward(batch, kv, logits.data(), pool, plan);
  return logits;
}

// The plan after a sequence computed `n_positions` positions and generated `n_generated`
// tokens, as the engine decides it (engine_run.cpp).
void adapt(const AdaptivePruner& pruner, KvCache& kv, const ChunkPlan& how, int n_generated,
           int n_positions, const ComputePlan& base, AdaptiveState& state,
           std::shared_ptr<const ComputePlan>& plan) {
  if (how.adaptive && pruner.due(n_generated)) {
    plan = pruner.update(kv, 0, n_positions, base, how.max_saved, state);
  }
}

// The chunk's prompt (BOS + prompt) as one prefill, then its response: teacher-forced (NLL and
// argmax at each scored position) and, with `generate`, greedily (for ROUGE-L). Under Level 3
// the plan changes where the engine would change it, so teacher-forced spans end there.
ChunkEval eval_chunk(Model& model, ThreadPool& pool, const CalibrationRequest& chunk,
                     const ChunkPlan& how, const AdaptivePruner& pruner, const ComputeCosts& costs,
                     bool generate) {
  const ModelConfig& m = model.config();
  const int n_vocab = m.n_vocab;
  const ComputePlan base = how.plan ? *how.plan : ComputePlan::full(m.n_layers, m.n_heads);
  const int end = 1 + chunk.prompt + chunk.scored;  // tokens in the chunk
  ChunkEval e;
  {
    auto kv = model.make_kv_cache();
    std::shared_ptr<const ComputePlan> plan = how.plan;
    AdaptiveState state;
    double saved = 0, nll = 0;
    int from = 0, to = 1 + chunk.prompt;  // the prefill; its last row predicts the first token
    while (from < end - 1) {
      const int first = std::max(from, chunk.prompt);  // the first row scored in this span
      const std::vector<float> rows =
          run_span(model, pool, *kv, chunk.tokens, from, to, first, plan.get());
      saved += (to - from) * (plan ? compute_saved(*plan, costs) : 0.0);
      for (int i = first; i < to; ++i) {
        const float* row = rows.data() + static_cast<size_t>(i - first) * n_vocab;
        nll += token_nll(row, n_vocab, chunk.tokens[i + 1]);
        e.argmax.push_back(argmax_of(row, n_vocab));
      }
      const int n_generated = to - chunk.prompt;  // predictions made so far
      adapt(pruner, *kv, how, n_generated, to, base, state, plan);
      from = to;
      // The next span ends where the next Level 3 decision falls (or at the chunk's end).
      const int interval = how.adaptive ? pruner.options().interval : end;
      const int next_decision = (n_generated / interval + 1) * interval;
      to = std::min(end - 1, chunk.prompt + next_decision);
    }
    e.nll = nll / chunk.scored;
    e.compute_saved = saved / (end - 1);
  }
  if (!generate) return e;
  auto kv = model.make_kv_cache();
  std::shared_ptr<const ComputePlan> plan = how.plan;
  AdaptiveState state;
  const std::vector<float> last =
      run_span(model, pool, *kv, chunk.tokens, 0, 1 + chunk.prompt, chunk.prompt, plan.get());
  TokenId next = argmax_of(last.data(), n_vocab);
  std::vector<float> step(n_vocab);
  for (int g = 1; g <= chunk.scored; ++g) {
    e.generated.push_back(next);
    if (g == chunk.scored) break;
    const int pos = chunk.prompt + g;  // position of the token just generated
    adapt(pruner, *kv, how, g, pos, base, state, plan);
    model.forward({{next, pos, 0, true}}, *kv, step.data(), pool, plan.get());
    next = argmax_of(step.data(), n_vocab);
  }
  return e;
}

std::vector<TokenId> continuation(const CalibrationRequest& c) {
  return {c.tokens.begin() + 1 + c.prompt, c.tokens.end()};
}

// Scored positions where `a` predicts the full model's top token.
size_t same_argmax(const ChunkEval& a, const ChunkEval& full) {
  size_t same = 0;
  for (size_t i = 0; i < a.argmax.size(); ++i) same += a.argmax[i] == full.argmax[i] ? 1 : 0;
  return same;
}

double agreement(const ChunkEval& a, const ChunkEval& full) {
  return a.argmax.empty() ? 1.0 : static_cast<double>(same_argmax(a, full)) / a.argmax.size();
}

// Perplexity over every scored token of the part, agreement over every scored position, ROUGE-L
// and compute saved per chunk.
Quality summarize(const std::vector<ChunkEval>& evals, const std::vector<ChunkEval>& full,
                  const std::vector<CalibrationRequest>& chunks) {
  Quality q;
  double nll = 0, rouge = 0, saved = 0;
  size_t tokens = 0, same = 0;
  for (size_t i = 0; i < evals.size(); ++i) {
    nll += evals[i].nll * chunks[i].scored;
    tokens += chunks[i].scored;
    same += same_argmax(evals[i], full[i]);
    rouge += rouge_l(evals[i].generated, continuation(chunks[i]));
    saved += evals[i].compute_saved;
  }
  const double n = static_cast<double>(evals.size());
  q.ppl = std::exp(nll / static_cast<double>(tokens));
  q.agreement = static_cast<double>(same) / static_cast<double>(tokens);
  q.rouge_l = rouge / n;
  q.compute_saved = saved / n;
  return q;
}

ComputePlan plan_with(ComputePlan plan, const UnitCost& u) {
  switch (u.kind) {
    case UnitCost::Kind::Attention:
      plan.set_attention(u.layer, false);
      break;
    case UnitCost::Kind::Ffn:
      plan.set_ffn(u.layer, false);
      break;
    case UnitCost::Kind::Head:
      plan.set_head(u.layer, u.head, false);
      break;
  }
  return plan;
}

// The units with the least damage per compute saved, switched off while the plan stays within
// `ratio`. Returns the plan and which units it took.
ComputePlan plan_for_ratio(const ModelConfig& m, const std::vector<UnitCost>& units, double ratio,
                           const ComputeCosts& costs, std::vector<bool>* taken) {
  std::vector<size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return units[a].damage / units[a].compute_share < units[b].damage / units[b].compute_share;
  });
  ComputePlan plan = ComputePlan::full(m.n_layers, m.n_heads);
  taken->assign(units.size(), false);
  for (size_t i : order) {
    const UnitCost& u = units[i];
    if (u.kind == UnitCost::Kind::Head && !plan.attention(u.layer)) continue;
    ComputePlan next = plan_with(plan, u);
    if (compute_saved(next, costs) <= ratio + 1e-12) {
      plan = std::move(next);
      (*taken)[i] = true;
    }
  }
  return plan;
}

// splitmix64 for the gate's deterministic initial weights.
float init_weight(uint64_t i) {
  const uint64_t x = splitmix64(i);
  return static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 - 0.5);
}

// Full-batch gradient descent on the binary cross-entropy of keep labels.
GateMlp train_gate(const ModelConfig& m, const std::vector<CalibrationRequest>& chunks,
                   const std::vector<std::vector<float>>& labels, int epochs) {
  GateMlp g = GateMlp::zero(kGateFeatures, m.n_layers, m.n_heads);
  for (size_t i = 0; i < g.w1.size(); ++i) g.w1[i] = init_weight(i);
  const int H = g.n_hidden, F = g.n_features, O = g.n_outputs();
  const float lr = 0.5f;
  std::vector<float> hidden(H), scores(O), d_hidden(H);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::vector<float> gw1(g.w1.size(), 0), gb1(H, 0), gw2(g.w2.size(), 0), gb2(O, 0);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const float* x = chunks[c].fp.features.data();
      g.keep_scores(x, hidden.data(), scores.data());
      std::fill(d_hidden.begin(), d_hidden.end(), 0.0f);
      for (int o = 0; o < O; ++o) {
        const float d = scores[o] - labels[c][o];
        gb2[o] += d;
        for (int j = 0; j < H; ++j) {
          gw2[o * H + j] += d * hidden[j];
          d_hidden[j] += d * g.w2[o * H + j];
        }
      }
      for (int j = 0; j < H; ++j) {
        const float d = d_hidden[j] * (1 - hidden[j] * hidden[j]);
        gb1[j] += d;
        for (int i = 0; i < F; ++i) gw1[j * F + i] += d * x[i];
      }
    }
    const float scale = lr / static_cast<float>(chunks.size());
    for (size_t i = 0; i < g.w1.size(); ++i) g.w1[i] -= scale * gw1[i];
    for (int j = 0; j < H; ++j) g.b1[j] -= scale * gb1[j];
    for (size_t i = 0; i < g.w2.size(); ++i) g.w2[i] -= scale * gw2[i];
    for (int o = 0; o < O; ++o) g.b2[o] -= scale * gb2[o];
  }
  return g;
}

// Gate for one ratio: the plan's heads as the head mask; a block unit's label is "skip" on a
// chunk when the plan takes it and its damage there is not an outlier (at most twice the
// largest mean damage among the plan's units).
GateMlp gate_for_ratio(const ModelConfig& m, const std::vector<UnitCost>& units,
                       const std::vector<bool>& taken,
                       const std::vector<CalibrationRequest>& chunks, int epochs) {
  double tolerance = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    if (taken[i]) tolerance = std::max(tolerance, 2 * units[i].damage);
  }
  std::vector<std::vector<float>> labels(chunks.size(), std::vector<float>(2 * m.n_layers, 1.0f));
  for (size_t i = 0; i < units.size(); ++i) {
    const UnitCost& u = units[i];
    if (!taken[i] || u.kind == UnitCost::Kind::Head) continue;
    const int out = u.kind == UnitCost::Kind::Attention ? u.layer : m.n_layers + u.layer;
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (u.chunk_damage[c] <= tolerance) labels[c][out] = 0.0f;
    }
  }
  GateMlp g = train_gate(m, chunks, labels, epochs);
  for (size_t i = 0; i < units.size(); ++i) {
    if (taken[i] && units[i].kind == UnitCost::Kind::Head) {
      g.head_off[static_cast<size_t>(units[i].layer) * m.n_heads + units[i].head] = 1;
    }
  }
  return g;
}

// Held-out text is the end of the file, cut at a paragraph or line break.
size_t held_out_start(const std::string& text, const CalibrationOptions& o) {
  size_t cut = static_cast<size_t>(text.size() * (1.0 - o.held_out_fraction));
  const size_t nl = text.rfind('\n', cut);
  if (nl != std::string::npos && nl > text.size() / 2) cut = nl + 1;
  return cut;
}

// Which bounds a row misses ("" when it passes).
std::string missed_bounds(const RatioRow& r, const QualityBounds& b) {
  std::string out;
  const auto add = [&out](const char* what) {
    out += (out.empty() ? "" : ", ") + std::string(what);
  };
  if (r.ppl_change > b.max_ppl_increase) add("PPL");
  if (r.quality.agreement < b.min_agreement) add("agreement");
  if (r.rouge_change < -b.max_rouge_drop) add("ROUGE-L");
  return out;
}

}  // namespace

std::string UnitCost::name() const {
  switch (kind) {
    case Kind::Attention:
      return "attn " + std::to_string(layer);
    case Kind::Ffn:
      return "ffn " + std::to_string(layer);
    case Kind::Head:
      break;
  }
  return "head " + std::to_string(layer) + ":" + std::to_string(head);
}

double rouge_l(const std::vector<TokenId>& a, const std::vector<TokenId>& b) {
  if (a.empty() && b.empty()) return 1.0;
  if (a.empty() || b.empty()) return 0.0;
  std::vector<int> prev(b.size() + 1, 0), cur(b.size() + 1, 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = a[i - 1] == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  const double lcs = prev[b.size()];
  if (lcs == 0) return 0.0;
  const double p = lcs / a.size(), r = lcs / b.size();
  return 2 * p * r / (p + r);
}

std::vector<uint64_t> paragraph_signatures(const std::string& text, size_t max) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos < text.size() && out.size() < max) {
    size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view para(text.data() + pos, end - pos);
    if (para.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      const uint64_t s = simhash64(para);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    pos = end + 2;
  }
  return out;
}

std::vector<CalibrationRequest> held_out_requests(const Tokenizer& tok, const std::string& text,
                                                  const CalibrationOptions& o) {
  return make_requests(tok, tok.encode(text.substr(held_out_start(text, o)), false, false), 2, o);
}

DomainCalibration calibrate_domain(Model& model, ThreadPool& pool, const std::string& name,
                                   const std::string& text, double ratio,
                                   const CalibrationOptions& o) {
  const ModelConfig& m = model.config();
  if (o.min_prompt_tokens < 1 || o.gen_tokens < 1 || o.min_response_tokens < 1 ||
      o.max_response_tokens < o.min_response_tokens ||
      o.min_prompt_tokens + std::min(o.gen_tokens, o.max_response_tokens) > o.chunk_tokens - 1) {
    fail("calibration: a chunk of ", o.chunk_tokens, " tokens cannot hold a prompt of at least ",
         o.min_prompt_tokens, " tokens and ", o.gen_tokens, " response tokens after its BOS");
  }
  if (o.chunk_tokens > m.context_length) {
    fail("calibration: chunk_tokens ", o.chunk_tokens, " exceeds the model's context ",
         m.context_length);
  }
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(name + ": " + line);
  };
  const size_t cut = held_out_start(text, o);
  const std::string calib_text = text.substr(0, cut);
  const Tokenizer& tok = model.tokenizer();
  const std::vector<CalibrationRequest> calib =
      make_requests(tok, tok.encode(calib_text, false, false), 1, o);
  const std::vector<CalibrationRequest> held = held_out_requests(tok, text, o);
  if (calib.empty() || held.empty()) {
    fail("calibration text for domain '", name, "' is too short: need at least ", o.chunk_tokens,
         " tokens in both the calibration part and the held-out part");
  }
  say(std::to_string(calib.size()) + " calibration chunks, " + std::to_string(held.size()) +
      " held-out chunks of at most " + std::to_string(o.chunk_tokens) + " tokens");

  DomainCalibration out;
  out.name = name;
  out.ratio = ratio;
  out.signatures = paragraph_signatures(calib_text, 64);
  const ComputeCosts costs = compute_costs(m, o.serving.reference_context);
  AdaptiveOptions adaptive = o.adaptive;
  adaptive.reference_context = o.serving.reference_context;
  const AdaptivePruner pruner(m, adaptive);

  std::vector<ChunkEval> full_calib;
  for (const CalibrationRequest& c : calib) {
    full_calib.push_back(eval_chunk(model, pool, c, ChunkPlan{}, pruner, costs, false));
  }

  // Units: every block's attention and FFN, every head.
  for (int l = 0; l < m.n_layers; ++l) {
    out.units.push_back({UnitCost::Kind::Attention, l, 0, 0, 0, {}});
    out.units.push_back({UnitCost::Kind::Ffn, l, 0, 0, 0, {}});
    for (int h = 0; h < m.n_heads; ++h) out.units.push_back({UnitCost::Kind::Head, l, h, 0, 0, {}});
  }
  const ComputePlan full_plan = ComputePlan::full(m.n_layers, m.n_heads);
  for (size_t i = 0; i < out.units.size(); ++i) {
    UnitCost& u = out.units[i];
    ChunkPlan fixed;
    fixed.plan = std::make_shared<const ComputePlan>(plan_with(full_plan, u));
    u.compute_share = compute_saved(*fixed.plan, costs);
    double sum = 0;
    for (size_t c = 0; c < calib.size(); ++c) {
      const ChunkEval e = eval_chunk(model, pool, calib[c], fixed, pruner, costs, false);
      const double d =
          (e.nll - full_calib[c].nll) / full_calib[c].nll + (1.0 - agreement(e, full_calib[c]));
      u.chunk_damage.push_back(d);
      sum += d;
    }
    u.damage = sum / calib.size();
    say("unit " + std::to_string(i + 1) + "/" + std::to_string(out.units.size()) + " (" + u.name() +
        "): damage " + std::to_string(u.damage) + ", compute " + std::to_string(u.compute_share));
  }

  std::vector<ChunkEval> full_held;
  for (const CalibrationRequest& c : held) {
    full_held.push_back(eval_chunk(model, pool, c, ChunkPlan{}, pruner, costs, true));
  }
  out.full = summarize(full_held, full_held, held);

  std::vector<double> ratios = o.ratios;
  ratios.push_back(ratio);
  std::sort(ratios.begin(), ratios.end());
  ratios.erase(std::unique(ratios.begin(), ratios.end(),
                           [](double a, double b) { return std::abs(a - b) < 1e-9; }),
               ratios.end());
  bool all_pass_so_far = true;
  for (double r : ratios) {
    std::vector<bool> taken;
    const ComputePlan plan = plan_for_ratio(m, out.units, r, costs, &taken);
    const GateMlp gate = gate_for_ratio(m, out.units, taken, calib, o.gate_epochs);
    // Held-out quality of what the server would serve: each chunk's Levels 1-2 plan from its
    // fingerprint, then Level 3 during its response.
    std::vector<ChunkEval> evals;
    for (const CalibrationRequest& c : held) {
      const PlanDecision d = plan_request(m, o.serving, costs, &gate, r, c.fp);
      const ChunkPlan served{d.plan, o.serving.adaptive && d.level > 0, d.max_saved};
      evals.push_back(eval_chunk(model, pool, c, served, pruner, costs, true));
    }
    RatioRow row;
    row.ratio = r;
    row.plan = plan.describe();
    row.quality = summarize(evals, full_held, held);
    row.ppl_change = row.quality.ppl / out.full.ppl - 1.0;
    row.rouge_change = out.full.rouge_l > 0 ? row.quality.rouge_l / out.full.rouge_l - 1.0 : 0.0;
    row.failed = missed_bounds(row, o.bounds);
    row.passes = row.failed.empty();
    // Suggested: the largest ratio up to the requested one below which every row passes (a
    // lone passing row above a failing one is noise, not a safe setting).
    all_pass_so_far = all_pass_so_far && row.passes;
    if (all_pass_so_far && r <= ratio + 1e-9) out.best_passing_ratio = r;
    if (std::abs(r - ratio) < 1e-9) {
      out.gate = gate;
      out.passes = row.passes;
    }
    say("ratio " + std::to_string(r) + ": compute saved " +
        std::to_string(row.quality.compute_saved) + ", PPL change " +
        std::to_string(row.ppl_change) + ", agreement " + std::to_string(row.quality.agreement) +
        ", ROUGE-L change " + std::to_string(row.rouge_change));
    out.table.push_back(std::move(row));
  }
  return out;
}

}  // namespace k25
