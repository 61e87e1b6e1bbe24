// R-PR5: what a compute plan skips, read back from the text the engine reports it as
// (ComputePlan::describe(): "full", or e.g. "attn-off[3] ffn-off[4,5] heads-off[2:0,1 3:4]"), for
// the response's flash object.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace k25 {

struct PlanSkips {
  std::vector<int> attention_off;              // layers whose attention is skipped
  std::vector<int> ffn_off;                    // layers whose FFN is skipped
  std::vector<std::pair<int, int>> heads_off;  // (layer, head) masked in layers still on
  int skipped_blocks() const { return static_cast<int>(attention_off.size() + ffn_off.size()); }
};

// Throws k25::Error for text that is not a plan description.
PlanSkips parse_plan_text(std::string_view text);

}  // namespace k25
