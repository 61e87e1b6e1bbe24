// The progress bar of k25-convert on stderr: on a terminal one line redrawn per tensor
// ("[ 12/291]  41%  1.20/2.94 GB  blk.3.attn_q.weight -> Q4_K"); otherwise quiet until the final
// line, which is the same either way ("wrote 291 tensors, 2.94 GB, in 12.3 s").
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace k25 {

class ConvertProgress {
 public:
  // `out` null: silent. `interactive`: redraw a bar (a terminal), else only the final line.
  ConvertProgress(std::ostream* out, bool interactive, size_t n_tensors, uint64_t total_bytes);
  // Tensor `index` (0-based) is being written; `done_bytes` of the output are written before it.
  void tensor(size_t index, const std::string& description, uint64_t done_bytes);
  // Prints the final line (and ends the bar).
  void finish();

  static std::string format_bytes(uint64_t bytes);  // "2.94 GB", "512.0 kB"
  // The final line for n tensors, bytes and seconds.
  static std::string final_line(size_t n_tensors, uint64_t bytes, double seconds);

 private:
  std::ostream* out_;
  bool interactive_;
  size_t n_tensors_;
  uint64_t total_bytes_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace k25
