// How a generation ended: the engine reports it, the C API and the HTTP answers name it.
#pragma once

namespace k25 {

enum class FinishReason { Stop, Length, Cancelled, Error };
// "stop", "length", "cancelled", "error" (the first two are OpenAI's finish_reason values).
const char* finish_reason_name(FinishReason reason);

}  // namespace k25
