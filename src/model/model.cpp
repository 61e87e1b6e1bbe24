#include "model/model.h"

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
