// The structs of include/k25.h and the engine's C++ values, each translated in one place: a
// k25_request into a GenerationRequest, a GenerationEvent into a k25_event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "k25.h"

namespace k25::capi {

// The engine's request for a C one, everything but the compute plan (k25_submit plans). A text
// prompt is tokenised with `tokenizer`; `default_mode` is the engine's speculative default.
// Throws k25::Error naming the field that is wrong.
GenerationRequest to_generation_request(const k25_request& c, const Tokenizer& tokenizer,
                                        SpeculativeMode default_mode);

// What a k25_event points into besides its GenerationEvent; reused from event to event.
struct EventBuffers {
  std::vector<int32_t> top_tokens;
  std::vector<float> top_logprobs;
  std::string final_plan;
};

// The C view of `e`: its pointers point into `e` and `buffers`.
k25_event to_c_event(const GenerationEvent& e, int64_t request_id, EventBuffers& buffers);

}  // namespace k25::capi
