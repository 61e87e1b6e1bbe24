// The forward pass of every supported architecture (Llama, Qwen2, Qwen3, Gemma 3) over a batch of
// tokens from any sequences. What differs between them is data: the config (model_config.h), its
// per-layer LayerSpec, and which optional weights a layer has (weights.h).
#pragma once

#include <vector>

#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/rope.h"
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
  void forward_hidden(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                      float* hidden, ThreadPool& pool) override;

 private:
  // The layers, then the logits of want_logits tokens and (hidden != null) the final hidden
  // states of want_hidden tokens.
  void run(const std::vector<BatchToken>& batch, KvCache& kv, float* logits, float* hidden,
           ThreadPool& pool, const ComputePlan* plan);
  void embed(const std::vector<BatchToken>& batch, KvCache& kv);
  // kv_only: the block's attention is switched off but its K/V rows are still written.
  void attention_block(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                       ThreadPool& pool, const ComputePlan* plan, bool kv_only);
  // Q/K norms and RoPE of the batch's fresh Q (unless kv_only) and K rows.
  void position_qk(int layer, const std::vector<BatchToken>& batch, bool kv_only);
  void ffn_block(int layer, int n_tokens, ThreadPool& pool);
  // The gated FFN of xn_ (the normed input of n tokens), written to xn_.
  void dense_ffn(const LayerWeights& L, int n_tokens, ThreadPool& pool);
  void attend(int layer, const std::vector<BatchToken>& batch, KvCache& kv, ThreadPool& pool,
              const ComputePlan* plan);
  // x_ += norm(xn_) * post_norm (Gemma's post-attention / post-FFN norms), or x_ += xn_.
  void add_residual(const std::vector<float>& post_norm, int n_tokens);

  LoadedModel model_;
  std::vector<Rope> rope_;  // per layer
  // Activations, reused across calls (forward is not reentrant).
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, cos_sin_;
  std::vector<std::vector<float>> scores_;  // per thread
  // Attention's partial outputs and their stats (max, exp sum) for windows over several chunks.
  std::vector<float> parts_, part_stats_;
  MoeFfn moe_ffn_;
};

}  // namespace k25
