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
  if (k <= 0 || size < 2) return {};
  // One pass over the places `end` where an earlier copy of the last token ends (its followers
  // text[end...] exist: end < size), measuring how many tokens before it match the text's end.
  // The longest match wins; among equal ones the latest, as recent text predicts best.
  int best_end = -1, best_len = 0;
  for (int end = size - 1; end >= 1; --end) {
    int len = 0;
    while (len < max_ngram_ && end - len >= 1 && text[end - 1 - len] == text[size - 1 - len]) {
      ++len;
    }
    if (len >= min_ngram_ && len > best_len) {
      best_len = len;
      best_end = end;
      if (len == max_ngram_) break;  // no later-scanned (earlier) place can beat it
    }
  }
  if (best_end < 0) return {};
  const int to = std::min(size, best_end + k);
  return {text.begin() + best_end, text.begin() + to};
}

}  // namespace k25
