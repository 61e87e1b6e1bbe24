// Embeddings: how a sequence's final hidden states (after the output norm) become one vector.
// GGUF names the pooling in `<arch>.pooling_type` (0 none, 1 mean, 2 cls, 3 last, 4 rank);
// generative models usually leave it out.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace k25 {

enum class Pooling { Mean, Cls, Last };

const char* pooling_name(Pooling pooling);  // "mean", "cls", "last"
// "mean", "cls" or "last"; nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);
// The GGUF value: 1 mean, 2 cls, 3 last; nullopt for the others (none, rank, unknown), which
// give no sequence embedding (k25 then pools by the mean, see ModelConfig::pooling).
std::optional<Pooling> pooling_from_gguf(int64_t value);

// Takes the hidden rows of one sequence's positions 0..n-1 in order (each at most once) and
// gives the pooled, L2-normalised vector. Mean sums in double, so the result does not depend on
// how the positions were split over forward calls.
class EmbeddingPooler {
 public:
  EmbeddingPooler(Pooling pooling, int dim);
  // Whether the row of position `pos` (in a sequence of n_tokens) is read.
  bool wants(int pos, int n_tokens) const;
  // The row of the next position not yet added (positions must come in order; a row for a
  // position already added is ignored, as a recomputed one is the same).
  void add(int pos, int n_tokens, const float* row);
  int next_position() const { return next_pos_; }
  // All n_tokens positions added: the unit-length vector (all zeros if the pooled one is zero).
  std::vector<float> result() const;

 private:
  Pooling pooling_;
  int dim_;
  int next_pos_ = 0;
  std::vector<double> sum_;
  int n_rows_ = 0;
};

}  // namespace k25
