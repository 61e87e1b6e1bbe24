// A loaded model: configuration, weights (mmap'd), tokenizer and the forward pass.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/compute_plan.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace k25 {

// One token of a forward batch. Tokens of one sequence must appear in position order; a
// sequence's earlier positions must already be in the KV cache.
struct BatchToken {
  TokenId token = 0;
  int pos = 0;
  int seq = 0;
  bool want_logits = false;
  bool want_hidden = false;  // forward_hidden: its final hidden state (embeddings)
};

class Model {
 public:
  // `path` is a GGUF file or a Hugging Face directory (config.json + *.safetensors +
  // tokenizer.json). Throws k25::Error with one clear line on any problem.
  static std::unique_ptr<Model> load(const std::string& path);
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // Runs the batch, writing K/V of every token into `kv` and, for each token with want_logits,
  // n_vocab logits into `logits` (in batch order, packed).
  virtual void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                       ThreadPool& pool) = 0;
  // The same under a compute plan (null or full = the whole model): switched-off blocks and heads
  // are not computed. Every token of the batch runs under the one plan. A model that cannot skip
  // work throws k25::Error for a plan that is not full rather than ignore it (pruning is never
  // silent, R-PR5).
  virtual void forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                       ThreadPool& pool, const ComputePlan* plan);
  // Tokens of different plans in one batch (issue 16): plans[t] is token t's plan (null = the
  // whole model). Each token's results are those of forward() under its own plan. This default
  // runs one forward call per distinct plan; a model that can share the weight passes between
  // plans overrides it.
  virtual void forward_mixed(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                             ThreadPool& pool, const std::vector<const ComputePlan*>& plans);
  // The whole model, like forward, and for each token with want_hidden also its final hidden
  // state (after the output norm, before the LM head): dim floats into `hidden`, in batch order,
  // packed. A model without hidden states throws k25::Error when a token wants one.
  virtual void forward_hidden(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                              float* hidden, ThreadPool& pool);
  // A cache for one or more sequences of the full context, rows stored as `dtype`.
  std::unique_ptr<KvCache> make_kv_cache(KvDtype dtype = KvDtype::kF32) const;
};

}  // namespace k25
