#include "server/ops_metrics.h"

#include <sstream>

#include "k25.h"

namespace k25 {

namespace {

void metric(std::ostringstream& out, const char* name, const char* type, const char* help,
            double value) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << value << '\n';
}

}  // namespace

std::string render_ops_metrics(const CircuitBreaker* breaker, const FallbackCounters& counters,
                               const std::optional<WarmupReport>& warmup) {
  std::ostringstream out;
  metric(out, "flash_fallback_state", "gauge",
         "Fallback circuit: 0 closed (engine), 1 open (upstream), 2 half-open (probing).",
         breaker ? static_cast<int>(breaker->state()) : 0);
  metric(out, "flash_fallback_consecutive_timeouts", "gauge",
         "Engine failures (timeouts and errors) in a row while the circuit is closed.",
         breaker ? breaker->consecutive_failures() : 0);
  metric(out, "flash_fallback_requests_total", "counter",
         "Generation requests answered by the fallback upstream.",
         static_cast<double>(counters.proxied.load()));
  metric(out, "flash_fallback_timeouts_total", "counter",
         "Generation requests the engine left without progress for fallback.timeout_ms.",
         static_cast<double>(counters.timeouts.load()));
  metric(out, "flash_fallback_upstream_errors_total", "counter",
         "Fallback upstream calls that failed (the engine answered instead, or the stream broke).",
         static_cast<double>(counters.upstream_errors.load()));
  const char* isa = k25_kernel_isa(nullptr);  // checked at start
  out << "# HELP k25_kernel_isa_info The kernel set in use (K25_ISA or the best the CPU runs).\n"
         "# TYPE k25_kernel_isa_info gauge\nk25_kernel_isa_info{isa=\""
      << (isa ? isa : "unknown") << "\"} 1\n";
  metric(out, "k25_warmup_requests", "gauge", "Warm-up prompts run at start.",
         warmup ? warmup->requests : 0);
  metric(out, "k25_warmup_duration_seconds", "gauge", "Time the start-up warm-up took.",
         warmup ? warmup->seconds : 0);
  return out.str();
}

}  // namespace k25
