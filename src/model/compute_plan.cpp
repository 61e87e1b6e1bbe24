#include "model/compute_plan.h"

#include <bit>

#include "core/error.h"

namespace k25 {

ComputePlan ComputePlan::full(int n_layers, int n_heads) {
  ComputePlan p;
  p.n_layers = n_layers;
  p.n_heads = n_heads;
  p.attention_on.assign(n_layers, 1);
  p.ffn_on.assign(n_layers, 1);
  p.heads_off.assign(static_cast<size_t>(n_layers) * p.words_per_layer(), 0);
  return p;
}

void ComputePlan::set_head(int layer, int h, bool on) {
  uint64_t& word = heads_off[layer * words_per_layer() + h / 64];
  const uint64_t bit = uint64_t{1} << (h % 64);
  word = on ? (word & ~bit) : (word | bit);
}

bool ComputePlan::is_full() const {
  for (int l = 0; l < n_layers; ++l) {
    if (!attention(l) || !ffn(l)) return false;
  }
  for (uint64_t w : heads_off) {
    if (w != 0) return false;
  }
  return true;
}

int ComputePlan::heads_on(int layer) const {
  int off = 0;
  for (int i = 0; i < words_per_layer(); ++i)
    off += std::popcount(heads_off[layer * words_per_layer() + i]);
  return n_heads - off;
}

int ComputePlan::skipped_blocks() const {
  int n = 0;
  for (int l = 0; l < n_layers; ++l) n += (attention(l) ? 0 : 1) + (ffn(l) ? 0 : 1);
  return n;
}

int ComputePlan::skipped_heads() const {
  return static_cast<int>(skipped_head_list().size());
}

std::vector<int> ComputePlan::skipped_attention_layers() const {
  std::vector<int> out;
  for (int l = 0; l < n_layers; ++l) {
    if (!attention(l)) out.push_back(l);
  }
  return out;
}

std::vector<int> ComputePlan::skipped_ffn_layers() const {
  std::vector<int> out;
  for (int l = 0; l < n_layers; ++l) {
    if (!ffn(l)) out.push_back(l);
  }
  return out;
}

std::vector<std::pair<int, int>> ComputePlan::skipped_head_list() const {
  std::vector<std::pair<int, int>> out;
  for (int l = 0; l < n_layers; ++l) {
    if (!attention(l)) continue;
    for (int h = 0; h < n_heads; ++h) {
      if (!head(l, h)) out.emplace_back(l, h);
    }
  }
  return out;
}

namespace {

// Appends only: GCC 12 warns (-Wrestrict, a false positive) on "literal" + std::string at -O3.
std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

}  // namespace

std::string ComputePlan::describe() const {
  if (is_full()) return "full";
  std::string out;
  const auto add = [&](const char* name, const std::string& list) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '[';
    out += list;
    out += ']';
  };
  if (auto a = skipped_attention_layers(); !a.empty()) add("attn-off", join(a));
  if (auto f = skipped_ffn_layers(); !f.empty()) add("ffn-off", join(f));
  std::string heads;
  int last_layer = -1;
  for (const auto& [l, h] : skipped_head_list()) {
    if (l != last_layer) {
      if (!heads.empty()) heads += ' ';
      heads += std::to_string(l);
      heads += ':';
      last_layer = l;
    } else {
      heads += ',';
    }
    heads += std::to_string(h);
  }
  if (!heads.empty()) add("heads-off", heads);
  if (out.empty()) out = "heads-off-in-skipped-blocks";
  return out;
}


void check_plan_shape(const ComputePlan& plan, int n_layers, int n_heads) {
  const size_t words = static_cast<size_t>(n_layers) * ((n_heads + 63) / 64);
  if (plan.n_layers != n_layers || plan.n_heads != n_heads ||
      plan.attention_on.size() != static_cast<size_t>(n_layers) ||
      plan.ffn_on.size() != static_cast<size_t>(n_layers) || plan.heads_off.size() != words) {
    fail("compute plan: shaped for ", plan.n_layers, " layers x ", plan.n_heads,
         " heads, the model has ", n_layers, " x ", n_heads);
  }
}

}  // namespace k25
