// The RoPE of a Hugging Face config.json: rope_theta and the rope_scaling object (its "rope_type"
// or older "type": default, linear, llama3, yarn), as the RopeSpec the GGUF of the same model
// would give.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/model_config.h"

namespace k25 {

// `scaling` is the rope_scaling value (null or absent: none); `path` names the file in errors.
RopeSpec hf_rope_spec(const nlohmann::json& scaling, float base, int rope_dim, int context_length,
                      const std::string& path);

}  // namespace k25
