// A testing aid (engine.debug_fault): throws inside an engine step at a chosen point, so tests
// can show that the engine's exception barrier fails only what the failure belongs to. Always
// compiled in, inert unless set. The spec names the exception and where it is thrown:
//   "<kind>:request=<id>:tokens=<n>"  while request <id> (ids count from 1 in submission order)
//                                     is put into a batch with <n> tokens generated: it belongs
//                                     to that request;
//   "<kind>:step=<n>"                 in the engine's <n>-th step (counting from 1) that runs a
//                                     forward call, after scheduling: it belongs to no request;
// kind is runtime_error (std::runtime_error) or bad_alloc (std::bad_alloc, an allocation
// failure). Each fault fires once.
#pragma once

#include <cstdint>
#include <string>

#include "engine/request.h"

namespace k25 {

struct StepFault {
  enum class Kind { kNone, kRuntimeError, kBadAlloc };
  Kind kind = Kind::kNone;
  RequestId request = 0;  // 0: the step (`step`), not a request
  int tokens = 0;
  uint64_t step = 0;
};

// "" is no fault; anything else that is not a spec above fails with a message naming the problem.
StepFault parse_step_fault(const std::string& spec);

class StepFaultInjector {
 public:
  explicit StepFaultInjector(StepFault fault) : fault_(fault) {}
  // Throws (once) when the fault is this step's.
  void at_step(uint64_t step);
  // Throws (once) when the fault is this request's at this many generated tokens.
  void at_request(RequestId id, int n_generated);

 private:
  [[noreturn]] void fire();

  StepFault fault_;
  bool fired_ = false;
};

}  // namespace k25
