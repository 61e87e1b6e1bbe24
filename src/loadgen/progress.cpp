#include "loadgen/progress.h"

#include <unistd.h>

#include <cstdio>

namespace k25::loadgen {

std::string progress_text(const ProgressState& s, int bar_width) {
  std::string bar;
  if (bar_width > 0) {
    const int filled = s.total > 0 ? s.completed * bar_width / s.total : 0;
    // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string at -O3.
    bar.push_back('[');
    bar.append(filled, '#');
    bar.append(bar_width - filled, '.');
    bar.append("] ");
  }
  char line[160];
  std::snprintf(line, sizeof line, "%d/%d done, %d running, %d errors, %.1f s", s.completed,
                s.total, s.running, s.errors, s.elapsed_s);
  bar.append(line);
  return bar;
}

Progress::Progress(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::update(const ProgressState& s) {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K", progress_text(s, 30).c_str());
    std::fflush(stderr);
    return;
  }
  const int decile = s.total > 0 ? s.completed * 10 / s.total : 0;
  if (decile > last_decile_ || s.elapsed_s - last_line_s_ >= 10) {
    std::fprintf(stderr, "progress: %s\n", progress_text(s, 0).c_str());
    last_decile_ = decile;
    last_line_s_ = s.elapsed_s;
  }
}

void Progress::finish(const ProgressState& s) {
  if (!enabled_) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s\x1b[K\n", progress_text(s, 30).c_str());
  } else {
    std::fprintf(stderr, "progress: %s\n", progress_text(s, 0).c_str());
  }
}

}  // namespace k25::loadgen
