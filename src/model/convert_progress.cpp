#include "model/convert_progress.h"

#include <cstdio>

namespace k25 {

ConvertProgress::ConvertProgress(std::ostream* out, bool interactive, size_t n_tensors,
                                 uint64_t total_bytes)
    : out_(out),
      interactive_(interactive),
      n_tensors_(n_tensors),
      total_bytes_(total_bytes),
      start_(std::chrono::steady_clock::now()) {}

std::string ConvertProgress::format_bytes(uint64_t bytes) {
  char text[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= 1000000000ULL) {
    std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
  } else if (bytes >= 1000000ULL) {
    std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
  }
  return text;
}

std::string ConvertProgress::final_line(size_t n_tensors, uint64_t bytes, double seconds) {
  char text[96];
  std::snprintf(text, sizeof text, "wrote %zu tensors, %s, in %.1f s", n_tensors,
                format_bytes(bytes).c_str(), seconds);
  return text;
}

void ConvertProgress::tensor(size_t index, const std::string& description, uint64_t done_bytes) {
  if (out_ == nullptr || !interactive_) return;
  const int percent = total_bytes_ == 0 ? 100 : static_cast<int>(100.0 * done_bytes / total_bytes_);
  char head[64];
  std::snprintf(head, sizeof head, "[%4zu/%zu] %3d%% ", index + 1, n_tensors_, percent);
  // \r and clear-to-end-of-line: the bar redraws in place.
  *out_ << "\r" << head << format_bytes(done_bytes) << "/" << format_bytes(total_bytes_) << "  "
        << description << "\033[K" << std::flush;
}

void ConvertProgress::finish() {
  if (out_ == nullptr) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (interactive_) *out_ << "\r\033[K";
  *out_ << final_line(n_tensors_, total_bytes_, seconds) << "\n" << std::flush;
}

}  // namespace k25
