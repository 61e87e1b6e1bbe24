// R-PR1: a request's compute plan, the on/off switches of every block's attention and FFN and of
// every attention head. Nothing is removed from the model; the forward pass reads the plan and
// skips the switched-off work. Sequences of any plans share one forward call
// (Model::forward_mixed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace k25 {

struct ComputePlan {
  int n_layers = 0;
  int n_heads = 0;
  // Per layer: 1 = run, 0 = skip (vectors of uint8_t rather than vector<bool>: cheap to compare).
  std::vector<uint8_t> attention_on;
  std::vector<uint8_t> ffn_on;
  // Per layer, words_per_layer() words: bit h set = query head h is masked (its attention is not
  // computed and it contributes nothing to the output projection).
  std::vector<uint64_t> heads_off;
  // A block whose attention is off still computes and stores its K/V rows when this is set, so
  // that Level 3 may switch the block on again later with a complete cache (see docs/flash.md).
  // When false, a skipped block's KV positions stay unwritten and the block must stay off for
  // the rest of the sequence.
  bool keep_kv_of_skipped = true;

  // Everything on.
  static ComputePlan full(int n_layers, int n_heads);

  int words_per_layer() const { return (n_heads + 63) / 64; }
  bool attention(int layer) const { return attention_on[layer] != 0; }
  bool ffn(int layer) const { return ffn_on[layer] != 0; }
  bool head(int layer, int h) const {
    return (heads_off[layer * words_per_layer() + h / 64] >> (h % 64) & 1) == 0;
  }
  void set_attention(int layer, bool on) { attention_on[layer] = on ? 1 : 0; }
  void set_ffn(int layer, bool on) { ffn_on[layer] = on ? 1 : 0; }
  void set_head(int layer, int h, bool on);

  // True when nothing is switched off (the forward pass then equals the unplanned one).
  bool is_full() const;
  // Heads of `layer` still on (the attention of a layer with all heads masked does nothing).
  int heads_on(int layer) const;
  // Switched-off block evaluations per token: attention blocks off + FFN blocks off.
  int skipped_blocks() const;
  int skipped_heads() const;  // masked heads in layers whose attention is on
  std::vector<int> skipped_attention_layers() const;
  std::vector<int> skipped_ffn_layers() const;
  // (layer, head) of every masked head in a layer whose attention is on.
  std::vector<std::pair<int, int>> skipped_head_list() const;

  // "full" or e.g. "attn-off[3] ffn-off[4,5] heads-off[2:0,1]" (logs, the response's flash object).
  std::string describe() const;

  friend bool operator==(const ComputePlan& a, const ComputePlan& b) = default;
};

// Whether two plans (null: the whole model) switch the same things: one pointer, or equal plans.
inline bool same_plan(const ComputePlan* a, const ComputePlan* b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

// Throws k25::Error unless `plan` has the shape of a model with n_layers / n_heads.
void check_plan_shape(const ComputePlan& plan, int n_layers, int n_heads);

}  // namespace k25
