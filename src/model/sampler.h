// Turns logits into the next token: greedy, temperature, top-k, top-p, min-p, repetition
// penalty, OpenAI's presence/frequency penalties and logit bias, seeded RNG; plus stop-string
// matching over generated text.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace k25 {

struct SamplingParams {
  float temperature = 0.8f;  // 0 = greedy (argmax; ties → lowest id)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty =
      1.0f;  // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int repeat_last_n = 64;
  // OpenAI semantics, over the tokens this sampler produced (not the prompt): a token's logit
  // loses frequency_penalty * its count so far, and presence_penalty once it occurred. 0: off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to a token's logit after the penalties; a bias of -100 or less bans the token.
  std::vector<std::pair<TokenId, float>> logit_bias;
  std::optional<uint64_t> seed;  // absent: random seed
};

class Sampler {
 public:
  Sampler(SamplingParams params, int n_vocab);
  // `logits` (n_vocab) may be modified. `history` = prompt + generated tokens so far.
  TokenId sample(float* logits, const std::vector<TokenId>& history);
  // The token sample() draws when every token outside `allowed` (bit t of word t / 64; tokens
  // past its end are outside) is at -inf, at the cost of the allowed tokens rather than of the
  // vocabulary: constrained decoding samples again among the few tokens a grammar allows.
  TokenId sample(float* logits, const std::vector<TokenId>& history,
                 const std::vector<uint64_t>& allowed);
  const SamplingParams& params() const { return params_; }

 private:
  TokenId counted(TokenId token);  // for the presence/frequency penalties
  TokenId pick(float* logits, const std::vector<TokenId>& history,
               const std::vector<uint64_t>* allowed);
  void apply_repeat_penalty(float* logits, const std::vector<TokenId>& history);
  void apply_openai_adjustments(float* logits) const;

  SamplingParams params_;
  int n_vocab_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, TokenId>> candidates_;
  std::unordered_map<TokenId, int> generated_counts_;  // kept only while a penalty is on
};

// log-softmax of the raw logits: the log-probability of `token` and the `top_n` most likely
// tokens with theirs (for OpenAI `logprobs`).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<TokenId, float>> top;
};
TokenLogprobs compute_logprobs(const float* logits, int n_vocab, TokenId token, int top_n);

// Watches generated text for stop strings. Text that could still become a stop string is held
// back, so a client never sees part of a stop string.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  struct Result {
    std::string emit;  // text safe to send now
    bool stopped = false;
    std::string stop;  // stopped: the stop string found (the earliest; the first listed on ties)
  };
  Result push(std::string_view text);
  std::string flush();  // at end of generation without a stop: the held-back text

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace k25
