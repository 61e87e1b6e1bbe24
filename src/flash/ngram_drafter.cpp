#include "flash/ngram_drafter.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

NgramDrafter::NgramDrafter(int max_ngram, int min_ngram)
    : max_ngram_(max_ngram), min_ngram_(min_ngram) {
  if (min_ngram < 1 || max_ngram < min_ngram) {
    fail("n-gram drafter: n-gram lengths ", min_ngram, "..", max_ngram, " (need 1 <= min <= max)");
  }
}

std::vector<TokenId> NgramDrafter::draft(const std::vector<TokenId>& text, int k) const {
  const int size = static_cast<int>(text.size());
  if (k <= 0) return {};
  for (int n = std::min(max_ngram_, size - 1); n >= min_ngram_; --n) {
    const auto suffix = text.end() - n;
    // Latest start first: recent text predicts the next tokens best. A match at `start` is
    // followed by text[start + n ...], which must exist (start + n < size).
    for (int start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix, text.end(), text.begin() + start)) continue;
      const int from = start + n;
      const int to = std::min(size, from + k);
      return {text.begin() + from, text.begin() + to};
    }
  }
  return {};
}

}  // namespace k25
