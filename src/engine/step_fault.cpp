#include "engine/step_fault.h"

#include <charconv>
#include <new>
#include <stdexcept>
#include <string_view>

#include "core/error.h"

namespace k25 {

namespace {
// The value of "<key>=<digits>" (> 0), or a failure naming the spec.
uint64_t positive_field(std::string_view field, std::string_view key, const std::string& spec) {
  uint64_t value = 0;
  if (field.size() > key.size() + 1 && field.substr(0, key.size()) == key &&
      field[key.size()] == '=') {
    const char* begin = field.data() + key.size() + 1;
    const char* end = field.data() + field.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc() && ptr == end && value > 0) return value;
  }
  fail("debug_fault '", spec, "': expected ", key, "=<positive integer>, got '", field, "'");
}
}  // namespace

StepFault parse_step_fault(const std::string& spec) {
  StepFault fault;
  if (spec.empty()) return fault;
  std::string_view rest = spec;
  const size_t colon = rest.find(':');
  const std::string_view kind = rest.substr(0, colon);
  if (kind == "runtime_error") {
    fault.kind = StepFault::Kind::kRuntimeError;
  } else if (kind == "bad_alloc") {
    fault.kind = StepFault::Kind::kBadAlloc;
  } else {
    fail("debug_fault '", spec, "': the kind must be runtime_error or bad_alloc");
  }
  if (colon == std::string_view::npos) {
    fail("debug_fault '", spec, "': expected <kind>:step=<n> or <kind>:request=<id>:tokens=<n>");
  }
  rest = rest.substr(colon + 1);
  const size_t second = rest.find(':');
  if (second == std::string_view::npos) {
    fault.step = positive_field(rest, "step", spec);
    return fault;
  }
  fault.request = positive_field(rest.substr(0, second), "request", spec);
  const std::string_view tokens = rest.substr(second + 1);
  // tokens=0 (before the first token: the prompt's first batch) is allowed.
  if (tokens == "tokens=0") return fault;
  const uint64_t n = positive_field(tokens, "tokens", spec);
  if (n > (uint64_t{1} << 30)) fail("debug_fault '", spec, "': tokens=", n, " is too large");
  fault.tokens = static_cast<int>(n);
  return fault;
}

void StepFaultInjector::at_step(uint64_t step) {
  if (!fired_ && fault_.kind != StepFault::Kind::kNone && fault_.request == 0 &&
      fault_.step == step) {
    fire();
  }
}

void StepFaultInjector::at_request(RequestId id, int n_generated) {
  if (!fired_ && fault_.kind != StepFault::Kind::kNone && fault_.request == id &&
      fault_.tokens == n_generated) {
    fire();
  }
}

void StepFaultInjector::fire() {
  fired_ = true;
  if (fault_.kind == StepFault::Kind::kBadAlloc) throw std::bad_alloc();
  throw std::runtime_error("injected fault (engine.debug_fault)");
}

}  // namespace k25
