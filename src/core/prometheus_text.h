// Pieces of the Prometheus text format (version 0.0.4) shared by the engine's and the server's
// metrics.
#pragma once

#include <sstream>

namespace k25 {

// The "# HELP" and "# TYPE" lines of one metric.
void prometheus_header(std::ostringstream& out, const char* name, const char* type,
                       const char* help);

}  // namespace k25
