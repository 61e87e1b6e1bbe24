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

struct Chunk {
  std::vector<TokenId> tokens;
  GateFeatures features{};
};

struct ChunkEval {
  double nll = 0;  // mean over scored positions
  std::vector<TokenId> argmax;
  std::vector<TokenId> generated;
};

TokenId argmax_of(const float* logits, int n) {
  return static_cast<TokenId>(std::max_element(logits, logits + n) - logits);
}

std::vector<Chunk> make_chunks(const Tokenizer& tok, const std::vector<TokenId>& ids,
                               const CalibrationOptions& o) {
  const int body = o.chunk_tokens - 1;  // after the BOS
  const int available = static_cast<int>(ids.size()) / body;
  const int n = std::min(available, o.max_chunks);
  std::vector<Chunk> out;
  for (int i = 0; i < n; ++i) {
    // Evenly spread over the text.
    const size_t start = static_cast<size_t>(i) * available / n * body;
    Chunk c;
    c.tokens.push_back(tok.bos());
    c.tokens.insert(c.tokens.end(), ids.begin() + start, ids.begin() + start + body);
    const std::vector<TokenId> prompt(c.tokens.begin() + 1, c.tokens.begin() + o.prompt_tokens);
    c.features = gate_features(tok.decode(prompt, false), o.prompt_tokens, o.gen_tokens, 50);
    out.push_back(std::move(c));
  }
  return out;
}

// Teacher-forced NLL and argmax over the chunk, then a greedy generation from its prompt
// prefix (reusing the cache: generated positions overwrite the ones after the prompt).
ChunkEval eval_chunk(Model& model, ThreadPool& pool, const Chunk& chunk, const ComputePlan* plan,
                     const CalibrationOptions& o) {
  const int n_vocab = model.config().n_vocab;
  const int n = static_cast<int>(chunk.tokens.size());
  std::vector<BatchToken> batch;
  for (int i = 0; i < n; ++i) batch.push_back({chunk.tokens[i], i, 0, true});
  std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
  auto kv = model.make_kv_cache();
  model.forward(batch, *kv, logits.data(), pool, plan);
  ChunkEval e;
  double nll = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const float* row = logits.data() + static_cast<size_t>(i) * n_vocab;
    nll += token_nll(row, n_vocab, chunk.tokens[i + 1]);
    e.argmax.push_back(argmax_of(row, n_vocab));
  }
  e.nll = nll / (n - 1);
  TokenId next = e.argmax[o.prompt_tokens - 1];
  std::vector<float> step(n_vocab);
  for (int g = 0; g < o.gen_tokens; ++g) {
    e.generated.push_back(next);
    if (g + 1 == o.gen_tokens) break;
    model.forward({{next, o.prompt_tokens + g, 0, true}}, *kv, step.data(), pool, plan);
    next = argmax_of(step.data(), n_vocab);
  }
  return e;
}

std::vector<TokenId> continuation(const Chunk& c, const CalibrationOptions& o) {
  return {c.tokens.begin() + o.prompt_tokens, c.tokens.begin() + o.prompt_tokens + o.gen_tokens};
}

double agreement(const ChunkEval& a, const ChunkEval& full) {
  int same = 0;
  for (size_t i = 0; i < a.argmax.size(); ++i) same += a.argmax[i] == full.argmax[i] ? 1 : 0;
  return a.argmax.empty() ? 1.0 : static_cast<double>(same) / a.argmax.size();
}

Quality summarize(const std::vector<ChunkEval>& evals, const std::vector<ChunkEval>& full,
                  const std::vector<Chunk>& chunks, const CalibrationOptions& o) {
  Quality q;
  double nll = 0, agree = 0, rouge = 0;
  for (size_t i = 0; i < evals.size(); ++i) {
    nll += evals[i].nll;
    agree += agreement(evals[i], full[i]);
    rouge += rouge_l(evals[i].generated, continuation(chunks[i], o));
  }
  const double n = static_cast<double>(evals.size());
  q.ppl = std::exp(nll / n);
  q.agreement = agree / n;
  q.rouge_l = rouge / n;
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
GateMlp train_gate(const ModelConfig& m, const std::vector<Chunk>& chunks,
                   const std::vector<std::vector<float>>& labels, int epochs) {
  GateMlp g = GateMlp::zero(kGateFeatures, m.n_layers, m.n_heads);
  for (size_t i = 0; i < g.w1.size(); ++i) g.w1[i] = init_weight(i);
  const int H = g.n_hidden, F = g.n_features, O = g.n_outputs();
  const float lr = 0.5f;
  std::vector<float> hidden(H), scores(O), d_hidden(H);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::vector<float> gw1(g.w1.size(), 0), gb1(H, 0), gw2(g.w2.size(), 0), gb2(O, 0);
    for (size_t c = 0; c < chunks.size(); ++c) {
      const float* x = chunks[c].features.data();
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
                       const std::vector<bool>& taken, const std::vector<Chunk>& chunks,
                       int epochs) {
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

DomainCalibration calibrate_domain(Model& model, ThreadPool& pool, const std::string& name,
                                   const std::string& text, double ratio,
                                   const CalibrationOptions& o) {
  const ModelConfig& m = model.config();
  if (o.prompt_tokens < 1 || o.gen_tokens < 1 || o.prompt_tokens + o.gen_tokens > o.chunk_tokens) {
    fail("calibration: prompt_tokens + gen_tokens must fit in chunk_tokens (", o.chunk_tokens, ")");
  }
  if (o.chunk_tokens > m.context_length) {
    fail("calibration: chunk_tokens ", o.chunk_tokens, " exceeds the model's context ",
         m.context_length);
  }
  const auto say = [&](const std::string& line) {
    if (o.progress) o.progress(name + ": " + line);
  };
  // Held-out text is the end of the file, cut at a paragraph or line break.
  size_t cut = static_cast<size_t>(text.size() * (1.0 - o.held_out_fraction));
  const size_t nl = text.rfind('\n', cut);
  if (nl != std::string::npos && nl > text.size() / 2) cut = nl + 1;
  const std::string calib_text = text.substr(0, cut), held_text = text.substr(cut);
  const Tokenizer& tok = model.tokenizer();
  const std::vector<Chunk> calib = make_chunks(tok, tok.encode(calib_text, false, false), o);
  const std::vector<Chunk> held = make_chunks(tok, tok.encode(held_text, false, false), o);
  if (calib.empty() || held.empty()) {
    fail("calibration text for domain '", name, "' is too short: need at least ", o.chunk_tokens,
         " tokens in both the calibration part and the held-out part");
  }
  say(std::to_string(calib.size()) + " calibration chunks, " + std::to_string(held.size()) +
      " held-out chunks of " + std::to_string(o.chunk_tokens) + " tokens");

  DomainCalibration out;
  out.name = name;
  out.ratio = ratio;
  out.signatures = paragraph_signatures(calib_text, 64);
  const ComputeCosts costs = compute_costs(m, o.reference_context);

  std::vector<ChunkEval> full_calib;
  for (const Chunk& c : calib) full_calib.push_back(eval_chunk(model, pool, c, nullptr, o));

  // Units: every block's attention and FFN, every head.
  for (int l = 0; l < m.n_layers; ++l) {
    out.units.push_back({UnitCost::Kind::Attention, l, 0, 0, 0, {}});
    out.units.push_back({UnitCost::Kind::Ffn, l, 0, 0, 0, {}});
    for (int h = 0; h < m.n_heads; ++h) out.units.push_back({UnitCost::Kind::Head, l, h, 0, 0, {}});
  }
  const ComputePlan full_plan = ComputePlan::full(m.n_layers, m.n_heads);
  for (size_t i = 0; i < out.units.size(); ++i) {
    UnitCost& u = out.units[i];
    const ComputePlan plan = plan_with(full_plan, u);
    u.compute_share = compute_saved(plan, costs);
    double sum = 0;
    for (size_t c = 0; c < calib.size(); ++c) {
      const ChunkEval e = eval_chunk(model, pool, calib[c], &plan, o);
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
  for (const Chunk& c : held) full_held.push_back(eval_chunk(model, pool, c, nullptr, o));
  out.full = summarize(full_held, full_held, held, o);

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
    // Held-out quality of what the server would run: each chunk's plan from the gate.
    std::vector<ChunkEval> evals;
    double saved = 0;
    for (const Chunk& c : held) {
      ComputePlan p = full_plan;
      apply_gate(gate, c.features, r, costs, p);
      saved += compute_saved(p, costs);
      evals.push_back(eval_chunk(model, pool, c, &p, o));
    }
    RatioRow row;
    row.ratio = r;
    row.plan = plan.describe();
    row.quality = summarize(evals, full_held, held, o);
    row.quality.compute_saved = saved / held.size();
    row.ppl_change = row.quality.ppl / out.full.ppl - 1.0;
    row.rouge_change = out.full.rouge_l > 0 ? row.quality.rouge_l / out.full.rouge_l - 1.0 : 0.0;
    row.passes = row.rouge_change >= -o.rouge_tolerance;
    // Suggested: the largest ratio up to the requested one below which every row passes (a
    // lone passing row above a failing one is noise in ROUGE-L, not a safe setting).
    all_pass_so_far = all_pass_so_far && row.passes;
    if (all_pass_so_far && r <= ratio + 1e-9) out.best_passing_ratio = r;
    if (std::abs(r - ratio) < 1e-9) {
      out.gate = gate;
      out.passes = row.passes;
    }
    say("ratio " + std::to_string(r) + ": compute saved " +
        std::to_string(row.quality.compute_saved) + ", ROUGE-L change " +
        std::to_string(row.rouge_change));
    out.table.push_back(std::move(row));
  }
  return out;
}

}  // namespace k25
