// The mixture-of-experts part of a GGUF model (llama.cpp's keys and tensor names).
#pragma once

#include <string>

#include "formats/gguf.h"
#include "model/model_config.h"
#include "model/moe_ffn.h"

namespace k25 {

// Reads `<arch>.expert_count`, `expert_used_count` and `expert_feed_forward_length` (all
// required) into c.
void read_gguf_moe_config(const GgufFile& f, const std::string& arch, ModelConfig& c);

// Layer `blk.N.` (prefix)'s router `ffn_gate_inp` and experts `ffn_{gate,up,down}_exps`, checked
// against c: each error names the tensor, and an expert count that disagrees with the metadata
// says so.
MoeWeights load_gguf_moe_layer(const GgufFile& f, const std::string& prefix,
                               const std::string& arch, const ModelConfig& c);

}  // namespace k25
