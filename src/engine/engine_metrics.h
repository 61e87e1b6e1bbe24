// The engine's counters and histograms (EngineStats) in the Prometheus text format (version
// 0.0.4): what k25_metrics() returns and the engine's part of the server's /metrics.
#pragma once

#include <sstream>
#include <string>

#include "core/prometheus_text.h"
#include "engine/engine_stats.h"

namespace k25 {

std::string render_engine_metrics(const EngineStats& engine);

}  // namespace k25
