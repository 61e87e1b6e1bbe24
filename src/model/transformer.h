// The forward pass of every supported architecture (Llama, Qwen2, Qwen3, Gemma 3) over a batch of
// tokens from any sequences. What differs between them is data: the config (model_config.h), its
// per-layer LayerSpec, and which optional weights a layer has (weights.h).
#pragma once

#include <vector>

#include "core/cache_aligned.h"
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
  void forward_mixed(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                     ThreadPool& pool, const std::vector<const ComputePlan*>& plans) override;
  void forward_hidden(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                      float* hidden, ThreadPool& pool) override;

 private:
  // The plan of each token of a batch: one for all (null: the whole model), or one per token.
  struct RowPlans {
    const ComputePlan* shared = nullptr;
    const std::vector<const ComputePlan*>* rows = nullptr;
    const ComputePlan* at(int t) const { return rows ? (*rows)[t] : shared; }
  };
  // The layers, then the logits of want_logits tokens and (hidden != null) the final hidden
  // states of want_hidden tokens.
  void run(const std::vector<BatchToken>& batch, KvCache& kv, float* logits, float* hidden,
           ThreadPool& pool, const RowPlans& plans);
  // One layer of a batch whose tokens have different plans: the attention weights run once over
  // the tokens whose attention is on (Q, K, V, output) or only keeps its K/V (K, V), the FFN
  // weights once over the tokens whose FFN is on; the others pass the block by.
  void mixed_layer(int layer, const std::vector<BatchToken>& batch, KvCache& kv, ThreadPool& pool,
                   const std::vector<const ComputePlan*>& plans);
  // Runs `block` on the tokens `rows` (batch indices) as if they were the whole batch: their
  // residual rows are gathered into x_ and scattered back after.
  template <typename Block>
  void on_rows(const std::vector<int>& rows, const std::vector<BatchToken>& batch, Block block);
  void embed(const std::vector<BatchToken>& batch, KvCache& kv);
  // The first n_query tokens run the whole attention block; the rest only write their K/V rows
  // (a block switched off whose K/V are kept). n_query = 0: K/V only.
  void attention_block(int layer, const std::vector<BatchToken>& batch, KvCache& kv,
                       ThreadPool& pool, const RowPlans& plans, int n_query);
  // Q/K norms and RoPE of the fresh Q rows of the first n_query tokens and of every K row.
  void position_qk(int layer, const std::vector<BatchToken>& batch, int n_query, ThreadPool& pool);
  void ffn_block(int layer, int n_tokens, ThreadPool& pool);
  // The gated FFN of xn_ (the normed input of n tokens), written to xn_.
  void dense_ffn(const LayerWeights& L, int n_tokens, ThreadPool& pool);
  // Attention of the first n_query tokens of the batch, each under its own plan's head mask.
  void attend(int layer, const std::vector<BatchToken>& batch, int n_query, KvCache& kv,
              ThreadPool& pool, const RowPlans& plans);
  // x_ += norm(xn_) * post_norm (Gemma's post-attention / post-FFN norms), or x_ += xn_.
  void add_residual(const std::vector<float>& post_norm, int n_tokens, ThreadPool& pool);

  LoadedModel model_;
  std::vector<Rope> rope_;  // per layer
  // Activations, reused across calls (forward is not reentrant).
  std::vector<float> x_, xn_, q_, k_, v_, gate_, up_;
  CacheAlignedVector<float> attn_;  // written by several attention tasks at once, a head each
  std::vector<uint8_t> embd_row_;   // one token's embedding row, read from the model file
  std::vector<float> gathered_;     // on_rows: the residual rows of the tokens outside the block
  std::vector<std::vector<float>> scores_;  // per thread
  // Attention's partial outputs and their stats (max, exp sum) for windows over several chunks.
  CacheAlignedVector<float> parts_;
  std::vector<float> part_stats_;  // 2 floats a slot: neighbouring slots share lines anyway
  MoeFfn moe_ffn_;
};

}  // namespace k25
