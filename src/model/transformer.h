// The Llama-family forward pass (Llama, Qwen2) over a batch of tokens from any sequences.
#pragma once

#include <vector>

#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/weights.h"

namespace k25 {

class Transformer final : public Model {
 public:
  explicit Transformer(LoadedModel loaded);
  const ModelConfig& config() const override { return model_.config; }
  const Tokenizer& tokenizer() const override { return *model_.tokenizer; }
  void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
               ThreadPool& pool) override;
  void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits, ThreadPool& pool,
               const ComputePlan* plan) override;

 private:
  // kv_only: the block's attention is switched off but its K/V rows are still written.
  void attention_block(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                       ThreadPool& pool, const ComputePlan* plan, bool kv_only);
  void ffn_block(int layer, int n_tokens, ThreadPool& pool);
  void attend(int layer, const std::vector<BatchToken>& batch, KvCache& kv, ThreadPool& pool,
              const ComputePlan* plan);
  void rope(float* vec, int n_heads, int pos) const;

  LoadedModel model_;
  std::vector<float> rope_inv_freq_;  // rope_dim / 2 frequencies
  // Activations, reused across calls (forward is not reentrant).
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, hidden_out_;
  std::vector<std::vector<float>> scores_;  // per thread
  MoeFfn moe_ffn_;
};

}  // namespace k25
