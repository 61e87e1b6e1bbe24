#include "model/model.h"

#include <algorithm>

#include "core/error.h"
#include "formats/model_location.h"
#include "model/transformer.h"

namespace k25 {

std::unique_ptr<Model> Model::load(const std::string& path) {
  const ModelLocation location = locate_model(path);
  if (!location.gguf.empty()) return std::make_unique<Transformer>(load_gguf_model(location.gguf));
  return std::make_unique<Transformer>(load_hf_model(location.hf_dir));
}

void Model::forward(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                    ThreadPool& pool, const ComputePlan* plan) {
  if (plan != nullptr && !plan->is_full()) {
    fail("model '", config().name, "' cannot run compute plan ", plan->describe());
  }
  forward(batch, kv, logits, pool);
}

void Model::forward_mixed(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                          ThreadPool& pool, const std::vector<const ComputePlan*>& plans) {
  if (plans.size() != batch.size())
    fail("forward_mixed: ", plans.size(), " plans for ", batch.size(), " tokens");
  const size_t n_vocab = config().n_vocab;
  std::vector<bool> done(batch.size(), false);
  for (size_t first = 0; first < batch.size(); ++first) {
    if (done[first]) continue;
    const ComputePlan* plan = plans[first];
    // The tokens of this plan, in batch order, and where their logits rows go.
    std::vector<BatchToken> group;
    std::vector<size_t> logit_rows;
    size_t row = 0;
    for (size_t t = 0; t < batch.size(); ++t) {
      if (same_plan(plans[t], plan) && !done[t]) {
        done[t] = true;
        group.push_back(batch[t]);
        if (batch[t].want_logits) logit_rows.push_back(row);
      }
      row += batch[t].want_logits ? 1 : 0;
    }
    std::vector<float> group_logits(logit_rows.size() * n_vocab);
    forward(group, kv, group_logits.data(), pool, plan);
    for (size_t i = 0; i < logit_rows.size(); ++i) {
      std::copy_n(group_logits.data() + i * n_vocab, n_vocab, logits + logit_rows[i] * n_vocab);
    }
  }
}

void Model::forward_hidden(const std::vector<BatchToken>& batch, KvCache& kv, float* logits,
                           float* /*hidden*/, ThreadPool& pool) {
  for (const BatchToken& t : batch) {
    if (t.want_hidden) fail("model '", config().name, "' gives no hidden states (embeddings)");
  }
  forward(batch, kv, logits, pool);
}

std::unique_ptr<KvCache> Model::make_kv_cache(KvDtype dtype) const {
  const ModelConfig& c = config();
  return std::make_unique<ContiguousKvCache>(c.n_layers, c.kv_dim(), c.context_length, dtype);
}

}  // namespace k25
