// Prompt-lookup drafting (issue 16): the text so far (prompt + generated tokens) often repeats
// itself (answers quote their input), so the tokens that followed the latest earlier occurrence
// of its last few tokens are a free guess of what comes next. The full model verifies the guess
// (engine/speculation.h), so a wrong guess costs time, never output.
#pragma once

#include <memory>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace k25 {

// Proposes up to k tokens to follow `text`; empty: no guess.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::vector<TokenId> draft(const std::vector<TokenId>& text, int k) const = 0;
};

// Finds the longest suffix of the text, of max_ngram tokens down to min_ngram, that occurs earlier
// in it (the latest such occurrence) and proposes the up to k tokens that followed it there. A
// long suffix tells apart the places where a short one recurs: a quoted document repeats its
// common phrases, and only the occurrence with the most context in common is the one being
// quoted.
class NgramDrafter final : public Drafter {
 public:
  // Throws k25::Error unless 1 <= min_ngram <= max_ngram.
  explicit NgramDrafter(int max_ngram = 16, int min_ngram = 1);
  std::vector<TokenId> draft(const std::vector<TokenId>& text, int k) const override;

 private:
  int max_ngram_, min_ngram_;
};

}  // namespace k25
