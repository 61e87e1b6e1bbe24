// The progress line of a k25-bench run on stderr: a bar redrawn in place on a terminal, plain
// lines now and then (each 10% of the requests, or every 10 s) when stderr is a file or pipe.
#pragma once

#include <string>

namespace k25::loadgen {

struct ProgressState {
  int completed = 0, total = 0, running = 0, errors = 0;
  double elapsed_s = 0;
};

std::string progress_text(const ProgressState& s, int bar_width);

class Progress {
 public:
  explicit Progress(bool enabled);
  void update(const ProgressState& s);
  void finish(const ProgressState& s);  // the last state, ending the line

 private:
  bool enabled_, tty_;
  int last_decile_ = -1;
  double last_line_s_ = 0;
};

}  // namespace k25::loadgen
