// A model for engine and server tests without weights: after token t the logits favour
// next(t) = t + 1 (wrapping to the first letter), unless a test overrides next for a token.
// Forward calls can be held at a gate so tests control exactly what is queued meanwhile.
#pragma once

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "model/model.h"

namespace k25::testing {

// <unk> <s> </s> a..z <0xC3> <0xA9> (the last two spell "é" as bytes).
inline Vocab letters_vocab() {
  Vocab v;
  v.kind = Vocab::Kind::Spm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
  for (char c = 'a'; c <= 'z'; ++c) {
    v.tokens.push_back(std::string(1, c));
    v.types.push_back(TokenType::Normal);
  }
  v.tokens.push_back("<0xC3>");
  v.types.push_back(TokenType::Byte);
  v.tokens.push_back("<0xA9>");
  v.types.push_back(TokenType::Byte);
  v.scores.assign(v.tokens.size(), 0.0f);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  return v;
}

inline constexpr TokenId kBos = 1, kEos = 2, kA = 3, kByteC3 = 29, kByteA9 = 30;
inline TokenId letter(char c) {
  return kA + (c - 'a');
}

class FakeModel : public Model {
 public:
  explicit FakeModel(int context_length = 64) : tokenizer_(letters_vocab()) {
    config_.name = "fake";
    config_.n_vocab = tokenizer_.n_vocab();
    config_.dim = 4;
    config_.n_layers = 1;
    config_.n_heads = 1;
    config_.n_kv_heads = 1;
    config_.head_dim = 1;
    config_.context_length = context_length;
  }

  const ModelConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return tokenizer_; }

  void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
               ThreadPool&) override {
    {
      std::unique_lock lock(mutex_);
      ++forward_calls_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !hold_ || permits_ > 0; });
      if (hold_) --permits_;
      if (fail_) throw std::runtime_error("fake forward failure");
      std::set<int> seqs;
      for (const BatchToken& t : batch) seqs.insert(t.seq);
      max_seqs_in_batch_ = std::max(max_seqs_in_batch_, static_cast<int>(seqs.size()));
    }
    const int n_vocab = config_.n_vocab;
    for (const BatchToken& t : batch) {
      const float token = static_cast<float>(t.token);
      kv.store(t.seq, 0, t.pos, &token, &token, 1);  // throws unless reserved
      if (!t.want_logits) continue;
      if (nan_logits_) {
        for (int i = 0; i < n_vocab; ++i) logits[i] = std::nanf("");
        logits += n_vocab;
        continue;
      }
      for (int i = 0; i < n_vocab; ++i) logits[i] = 0.0f;
      logits[next(t.token)] = 10.0f;
      logits[(next(t.token) + 1) % n_vocab] = 5.0f;
      logits += n_vocab;
    }
  }

  TokenId next(TokenId t) const {
    std::lock_guard lock(next_mutex_);
    auto it = next_.find(t);
    if (it != next_.end()) return it->second;
    return t + 1 < config_.n_vocab ? t + 1 : kA;
  }
  void set_next(TokenId after, TokenId token) {
    std::lock_guard lock(next_mutex_);
    next_[after] = token;
  }

  // Holding: forward calls wait until release().
  void hold() {
    std::lock_guard lock(mutex_);
    hold_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    hold_ = false;
    cv_.notify_all();
  }
  // While holding: lets `n` more forward calls through.
  void grant(int n) {
    std::lock_guard lock(mutex_);
    permits_ += n;
    cv_.notify_all();
  }
  void wait_for_forward_calls(int n) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return forward_calls_ >= n; });
  }
  void fail_forward() {
    std::lock_guard lock(mutex_);
    fail_ = true;
  }
  // Every logit NaN (what the sampler refuses) until switched off again.
  void set_nan_logits(bool on) { nan_logits_ = on; }
  int forward_calls() const {
    std::lock_guard lock(mutex_);
    return forward_calls_;
  }
  int max_seqs_in_batch() const {
    std::lock_guard lock(mutex_);
    return max_seqs_in_batch_;
  }

 private:
  ModelConfig config_;
  Tokenizer tokenizer_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool hold_ = false;
  bool fail_ = false;
  std::atomic<bool> nan_logits_{false};
  int permits_ = 0;
  int forward_calls_ = 0;
  int max_seqs_in_batch_ = 0;
  mutable std::mutex next_mutex_;
  std::map<TokenId, TokenId> next_;
};

}  // namespace k25::testing
