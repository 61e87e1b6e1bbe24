#include "model/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"

namespace k25 {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using Candidate = std::pair<float, TokenId>;

// Strict total order: higher logit/probability first, lower id first on ties, so every
// selection (argmax, top-k, top-n) breaks ties the same way.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// NaN would break the ordering above; a NaN logit is treated as "never".
float sanitize(float logit) {
  return std::isnan(logit) ? kNegInf : logit;
}

uint64_t initial_seed(const SamplingParams& params) {
  if (params.seed) return *params.seed;
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
}

const SamplingParams& validated(const SamplingParams& params, int n_vocab) {
  if (n_vocab <= 0) fail("sampler: n_vocab must be positive, got ", n_vocab);
  if (!std::isfinite(params.temperature))
    fail("sampler: temperature must be finite, got ", params.temperature);
  if (std::isnan(params.top_p)) fail("sampler: top_p is NaN");
  if (std::isnan(params.min_p)) fail("sampler: min_p is NaN");
  if (!(params.repeat_penalty > 0) || !std::isfinite(params.repeat_penalty))
    fail("sampler: repeat_penalty must be a positive finite number, got ", params.repeat_penalty);
  if (!std::isfinite(params.presence_penalty) || !std::isfinite(params.frequency_penalty))
    fail("sampler: presence_penalty and frequency_penalty must be finite");
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab)
      fail("sampler: logit_bias token ", id, " is outside the vocabulary [0, ", n_vocab, ")");
    if (std::isnan(bias)) fail("sampler: logit_bias of token ", id, " is NaN");
  }
  return params;
}

// Lowest id among the largest logits; NaN never wins.
TokenId argmax(const float* logits, int n_vocab) {
  TokenId best = -1;
  float best_logit = kNegInf;
  for (int i = 0; i < n_vocab; ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > best_logit) {
      best = i;
      best_logit = logits[i];
    }
  }
  if (best < 0) fail("sampler: every logit is NaN");
  return best;
}

// Uniform double in [0, 1) from the top 53 bits, independent of the standard library's
// distribution implementation, so a seed means the same draws everywhere.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

Sampler::Sampler(SamplingParams params, int n_vocab)
    : params_(validated(params, n_vocab)), n_vocab_(n_vocab), rng_(initial_seed(params_)) {
  candidates_.reserve(static_cast<size_t>(n_vocab_));
}

TokenId Sampler::sample(float* logits, const std::vector<TokenId>& history) {
  return counted(pick(logits, history, nullptr));
}

TokenId Sampler::sample(float* logits, const std::vector<TokenId>& history,
                        const std::vector<uint64_t>& allowed) {
  return counted(pick(logits, history, &allowed));
}

TokenId Sampler::counted(TokenId token) {
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0) ++generated_counts_[token];
  return token;
}

void Sampler::apply_repeat_penalty(float* logits, const std::vector<TokenId>& history) {
  // Repetition penalty over the last repeat_last_n tokens (negative: the whole history), each
  // distinct token once. candidates_ doubles as the scratch list of distinct ids.
  if (params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0 && !history.empty()) {
    const size_t window =
        params_.repeat_last_n < 0
            ? history.size()
            : std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    candidates_.clear();
    for (size_t i = history.size() - window; i < history.size(); ++i) {
      const TokenId id = history[i];
      if (id < 0 || id >= n_vocab_)
        fail("sampler: history token ", id, " at position ", i, " is outside the vocabulary [0, ",
             n_vocab_, ")");
      candidates_.emplace_back(0.0f, id);
    }
    std::sort(candidates_.begin(), candidates_.end(),
              [](const Candidate& a, const Candidate& b) { return a.second < b.second; });
    const auto distinct_end =
        std::unique(candidates_.begin(), candidates_.end(),
                    [](const Candidate& a, const Candidate& b) { return a.second == b.second; });
    for (auto it = candidates_.begin(); it != distinct_end; ++it) {
      float& logit = logits[it->second];
      logit = logit > 0 ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
    }
  }
}

void Sampler::apply_openai_adjustments(float* logits) const {
  for (const auto& [id, count] : generated_counts_) {
    logits[id] -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
  for (const auto& [id, bias] : params_.logit_bias) {
    logits[id] = bias <= -100.0f ? kNegInf : logits[id] + bias;
  }
}

TokenId Sampler::pick(float* logits, const std::vector<TokenId>& history,
                      const std::vector<uint64_t>* allowed) {
  apply_repeat_penalty(logits, history);
  apply_openai_adjustments(logits);

  if (params_.temperature <= 0) {
    if (allowed) {  // greedy is one pass over the vocabulary anyway
      for (int i = 0; i < n_vocab_; ++i) {
        const size_t word = static_cast<size_t>(i) >> 6;
        if (word >= allowed->size() || !(((*allowed)[word] >> (i & 63)) & 1)) logits[i] = kNegInf;
      }
    }
    return argmax(logits, n_vocab_);
  }

  // Top-k keeps the k best in order; min-p needs no order.
  const bool top_k_on = params_.top_k > 0 && params_.top_k < n_vocab_;
  const bool top_p_on = params_.top_p < 1.0f;
  const auto top_k = static_cast<size_t>(params_.top_k);
  // Candidates come in rising id order. With top-k on, candidates_ is a heap of the k best so far
  // whose front is the worst of them, so almost every logit is turned away by one comparison
  // and no candidate is written for every token (a 152k vocabulary: the sampler's share of a
  // 1-thread qwen3moe-small run went from 1.95% to 1.47% in perf); a newcomer tied with the worst
  // has the higher id, ranks after it and is turned away too, as a partial sort would have it.
  const auto offer = [&](float logit, TokenId id) {
    if (!top_k_on) {
      candidates_.emplace_back(logit, id);
    } else if (candidates_.size() < top_k) {
      candidates_.emplace_back(logit, id);
      std::push_heap(candidates_.begin(), candidates_.end(), ranks_before);
    } else if (logit > candidates_.front().first) {
      std::pop_heap(candidates_.begin(), candidates_.end(), ranks_before);
      candidates_.back() = {logit, id};
      std::push_heap(candidates_.begin(), candidates_.end(), ranks_before);
    }
  };
  candidates_.clear();
  if (allowed) {
    // A refused token is one at -inf: weight 0, which no filter keeps and no draw picks, and 0
    // added to every sum. Leaving it out changes no token and makes the cost that of the allowed
    // tokens, not of the vocabulary.
    for (size_t word = 0; word < allowed->size(); ++word) {
      for (uint64_t bits = (*allowed)[word]; bits != 0; bits &= bits - 1) {
        const int i = static_cast<int>(word * 64) + std::countr_zero(bits);
        if (i >= n_vocab_) break;
        offer(sanitize(logits[i]), i);
      }
    }
    if (candidates_.empty()) fail("sampler: every logit is -inf or NaN");
  } else {
    // Once the heap holds k, a logit joins only above its front, which never falls: a stretch of
    // logits none of which is above it (one compare each, vectorised; NaN compares false) is
    // passed over whole. The 152k-vocabulary pass took about 3% of a 2-thread qwen3moe-small
    // decode on the main thread before this.
    constexpr int kStretch = 64;
    const auto none_above_front = [&](int i) {
      if (!top_k_on || candidates_.size() < top_k) return false;
      const float front = candidates_.front().first;
      int above = 0;
      for (int j = i; j < i + kStretch; ++j) above += logits[j] > front;
      return above == 0;
    };
    int i = 0;
    for (; i + kStretch <= n_vocab_; i += kStretch) {
      if (none_above_front(i)) continue;
      for (int j = i; j < i + kStretch; ++j) offer(sanitize(logits[j]), j);
    }
    for (; i < n_vocab_; ++i) offer(sanitize(logits[i]), i);
  }
  bool sorted = false;
  if (top_k_on) {
    std::sort_heap(candidates_.begin(), candidates_.end(), ranks_before);
    sorted = true;
  }

  const float max_logit = sorted ? candidates_.front().first
                                 : std::max_element(candidates_.begin(), candidates_.end(),
                                                    [](const Candidate& a, const Candidate& b) {
                                                      return a.first < b.first;
                                                    })
                                       ->first;
  if (max_logit == kNegInf) fail("sampler: every logit is -inf or NaN");

  // Softmax with temperature; the max logit maps to weight 1 (also when it is +inf).
  const float inv_temperature = 1.0f / params_.temperature;
  double weight_sum = 0;
  for (Candidate& c : candidates_) {
    c.first = c.first == max_logit ? 1.0f : std::exp((c.first - max_logit) * inv_temperature);
    weight_sum += c.first;
  }
  const auto inv_sum = static_cast<float>(1.0 / weight_sum);
  for (Candidate& c : candidates_) c.first *= inv_sum;

  if (top_p_on) {
    // Top-p needs the candidates in order only up to the cut, which usually lies among the
    // first few hundred: sort a growing prefix instead of the whole vocabulary.
    size_t ordered = sorted ? candidates_.size() : 0;
    size_t keep = candidates_.size();
    double cumulative = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (i == ordered) {
        ordered = std::min(candidates_.size(), std::max<size_t>(256, ordered * 4));
        const auto from = candidates_.begin() + static_cast<std::ptrdiff_t>(i);
        const auto to = candidates_.begin() + static_cast<std::ptrdiff_t>(ordered);
        if (to == candidates_.end()) {
          std::sort(from, to, ranks_before);  // faster than a partial sort of everything
        } else {
          std::partial_sort(from, to, candidates_.end(), ranks_before);
        }
      }
      cumulative += candidates_[i].first;
      if (cumulative >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    candidates_.resize(keep);
    sorted = true;
  }

  if (params_.min_p > 0) {
    const float max_prob = sorted ? candidates_.front().first
                                  : std::max_element(candidates_.begin(), candidates_.end(),
                                                     [](const Candidate& a, const Candidate& b) {
                                                       return a.first < b.first;
                                                     })
                                        ->first;
    // Clamped so the most likely token always survives.
    const float threshold = std::min(params_.min_p, 1.0f) * max_prob;
    std::erase_if(candidates_, [threshold](const Candidate& c) { return c.first < threshold; });
  }

  // Draw from the renormalised survivors.
  double total = 0;
  for (const Candidate& c : candidates_) total += c.first;
  const double target = uniform01(rng_) * total;
  double cumulative = 0;
  TokenId last_possible = candidates_.front().second;
  for (const Candidate& c : candidates_) {
    if (c.first <= 0) continue;
    cumulative += c.first;
    last_possible = c.second;
    if (target < cumulative) return c.second;
  }
  return last_possible;  // rounding left target at the very top of the range
}

TokenLogprobs compute_logprobs(const float* logits, int n_vocab, TokenId token, int top_n) {
  if (n_vocab <= 0) fail("logprobs: n_vocab must be positive, got ", n_vocab);
  if (token < 0 || token >= n_vocab)
    fail("logprobs: token ", token, " is outside the vocabulary [0, ", n_vocab, ")");
  if (top_n < 0) fail("logprobs: top_n must not be negative, got ", top_n);

  float max_logit = kNegInf;
  for (int i = 0; i < n_vocab; ++i) max_logit = std::max(max_logit, sanitize(logits[i]));
  if (max_logit == kNegInf) fail("logprobs: every logit is -inf or NaN");
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i)
    sum += std::exp(static_cast<double>(sanitize(logits[i])) - max_logit);
  const double log_normalizer = static_cast<double>(max_logit) + std::log(sum);
  const auto logprob_of = [&](TokenId id) {
    return static_cast<float>(static_cast<double>(sanitize(logits[id])) - log_normalizer);
  };

  // The top_n best as a heap whose root is the worst kept entry: O(n log top_n).
  const auto keep = static_cast<size_t>(std::min(top_n, n_vocab));
  std::vector<Candidate> best;
  best.reserve(keep);
  if (keep > 0) {
    for (int i = 0; i < n_vocab; ++i) {
      const Candidate c{sanitize(logits[i]), i};
      if (best.size() < keep) {
        best.push_back(c);
        std::push_heap(best.begin(), best.end(), ranks_before);
      } else if (ranks_before(c, best.front())) {
        std::pop_heap(best.begin(), best.end(), ranks_before);
        best.back() = c;
        std::push_heap(best.begin(), best.end(), ranks_before);
      }
    }
    std::sort_heap(best.begin(), best.end(), ranks_before);
  }

  TokenLogprobs result;
  result.logprob = logprob_of(token);
  result.top.reserve(best.size());
  for (const Candidate& c : best) result.top.emplace_back(c.second, logprob_of(c.second));
  return result;
}

namespace {

// Length of the UTF-8 sequence a lead byte starts; 0 for a continuation or invalid byte.
size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

// Moves `cut` back to the start of the character that straddles it, if any. Malformed bytes
// count as boundaries so that they are never held back forever.
size_t utf8_boundary_at_or_before(std::string_view text, size_t cut) {
  for (size_t back = 1; back <= 4 && back <= cut; ++back) {
    const auto byte = static_cast<unsigned char>(text[cut - back]);
    if ((byte & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t length = utf8_sequence_length(byte);
    return length > back ? cut - back : cut;
  }
  return cut;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& stop : stops)
    if (!stop.empty()) stops_.push_back(std::move(stop));
}

StopMatcher::Result StopMatcher::push(std::string_view text) {
  held_.append(text);
  Result result;

  size_t earliest = std::string::npos;
  const std::string* first_stop = nullptr;
  for (const std::string& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at < earliest) {
      earliest = at;
      first_stop = &stop;
    }
  }
  if (first_stop) {
    result.emit = held_.substr(0, earliest);
    result.stopped = true;
    result.stop = *first_stop;
    held_.clear();
    return result;
  }

  // Hold back the longest tail that a later push could complete into a stop string.
  size_t hold = 0;
  const std::string_view buffer = held_;
  for (const std::string& stop : stops_) {
    for (size_t length = std::min(stop.size() - 1, buffer.size()); length > hold; --length) {
      if (buffer.ends_with(std::string_view(stop).substr(0, length))) {
        hold = length;
        break;
      }
    }
  }
  const size_t cut = utf8_boundary_at_or_before(buffer, buffer.size() - hold);
  result.emit = held_.substr(0, cut);
  held_.erase(0, cut);
  return result;
}

std::string StopMatcher::flush() {
  std::string rest = std::move(held_);
  held_.clear();
  return rest;
}

}  // namespace k25
