#include "model/pooling.h"

#include <cmath>

#include "core/error.h"

namespace k25 {

const char* pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "mean";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  if (name == "mean") return Pooling::Mean;
  if (name == "cls") return Pooling::Cls;
  if (name == "last") return Pooling::Last;
  return std::nullopt;
}

std::optional<Pooling> pooling_from_gguf(int64_t value) {
  switch (value) {
    case 1:
      return Pooling::Mean;
    case 2:
      return Pooling::Cls;
    case 3:
      return Pooling::Last;
    default:
      return std::nullopt;
  }
}

EmbeddingPooler::EmbeddingPooler(Pooling pooling, int dim)
    : pooling_(pooling), dim_(dim), sum_(static_cast<size_t>(dim), 0.0) {
  if (dim <= 0) fail("embedding: dimension ", dim, " must be positive");
}

bool EmbeddingPooler::wants(int pos, int n_tokens) const {
  if (pos < next_pos_) return false;
  switch (pooling_) {
    case Pooling::Mean:
      return true;
    case Pooling::Cls:
      return pos == 0;
    case Pooling::Last:
      return pos == n_tokens - 1;
  }
  return false;
}

void EmbeddingPooler::add(int pos, int n_tokens, const float* row) {
  if (pos < next_pos_) return;
  if (pos > next_pos_ && pooling_ == Pooling::Mean) {
    fail("embedding: position ", pos, " added before position ", next_pos_);
  }
  if (wants(pos, n_tokens)) {
    for (int i = 0; i < dim_; ++i) sum_[i] += row[i];
    ++n_rows_;
  }
  next_pos_ = pos + 1;
}

std::vector<float> EmbeddingPooler::result() const {
  const double scale = n_rows_ > 0 ? 1.0 / n_rows_ : 0.0;
  double norm2 = 0;
  for (double v : sum_) norm2 += (v * scale) * (v * scale);
  const double inv = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
  std::vector<float> out(static_cast<size_t>(dim_));
  for (int i = 0; i < dim_; ++i) out[i] = static_cast<float>(sum_[i] * scale * inv);
  return out;
}

}  // namespace k25
