#include "engine/embedding_batch.h"

#include <condition_variable>
#include <mutex>

#include "core/error.h"

namespace k25 {

namespace {

struct Pending {
  std::mutex mutex;
  std::condition_variable done;
  size_t n_finished = 0;
  std::vector<GenerationEvent> finished;  // by input
};

}  // namespace

std::vector<std::vector<float>> embed_all(Engine& engine,
                                          const std::vector<std::vector<TokenId>>& inputs,
                                          Pooling pooling) {
  auto pending = std::make_shared<Pending>();
  pending->finished.resize(inputs.size());
  size_t n_submitted = 0;
  std::string refused;
  for (size_t i = 0; i < inputs.size() && refused.empty(); ++i) {
    GenerationRequest request;
    request.prompt = inputs[i];
    request.embedding = pooling;
    SubmitResult r = engine.submit(std::move(request), [pending, i](const GenerationEvent& e) {
      if (e.kind != GenerationEvent::Kind::Finished) return;
      std::lock_guard lock(pending->mutex);
      pending->finished[i] = e;
      ++pending->n_finished;
      pending->done.notify_all();
    });
    if (r.status == SubmitStatus::Accepted) {
      ++n_submitted;
    } else {
      refused = concat("input ", i, ": ", r.message);
    }
  }
  std::unique_lock lock(pending->mutex);
  pending->done.wait(lock, [&] { return pending->n_finished == n_submitted; });
  if (!refused.empty()) fail(refused);
  std::vector<std::vector<float>> vectors;
  for (size_t i = 0; i < inputs.size(); ++i) {
    GenerationEvent& e = pending->finished[i];
    if (e.finish_reason != FinishReason::Stop) {
      fail("input ", i, ": ", e.error.empty() ? finish_reason_name(e.finish_reason) : e.error);
    }
    vectors.push_back(std::move(e.embedding));
  }
  return vectors;
}

}  // namespace k25
