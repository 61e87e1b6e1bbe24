#include "core/prometheus_text.h"

namespace k25 {

void prometheus_header(std::ostringstream& out, const char* name, const char* type,
                       const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace k25
