// POST /v1/embeddings: each input becomes one embedding request of the engine (prefill only,
// pooled as the model says), all submitted at once so that they share forward calls; the
// vectors come back in input order.
#include <mutex>

#include "core/error.h"
#include "server/api.h"
#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/event_channel.h"
#include "server/request_log.h"
#include "server/response_format.h"

namespace k25 {

namespace {

constexpr std::chrono::milliseconds kClientCheckInterval{100};
// A request the engine has finished holds its queue place until the engine releases it, a
// moment after its event: a full queue is retried this often, this many times, before 429.
constexpr std::chrono::milliseconds kReleaseWait{2};
constexpr int kMaxReleaseWaits = 250;

// The inputs' Finished events, by input; the channel only wakes the coroutine.
struct EmbeddingResults {
  std::mutex mutex;
  std::vector<EngineEvent> finished;
};

ApiError submit_error(const Admission& r, int retry_after_s) {
  ApiError e;
  e.message = r.message;
  e.retry_after_s = retry_after_s;
  if (r.status == AdmissionStatus::QueueFull) {
    e.status = 429;
    e.type = "rate_limit_error";
    e.code = "queue_full";
  } else if (r.status == AdmissionStatus::ShuttingDown) {
    e.status = 503;
    e.type = "service_unavailable";
    e.code = "draining";
  } else {
    e.status = 500;
    e.type = "server_error";
    e.code = "internal_error";
    e.retry_after_s = 0;
  }
  return e;
}

}  // namespace

net::awaitable<void> Api::embeddings(HttpExchange& ex, RequestLog& log) {
  EngineClient& engine = serving_engine();
  const EmbeddingRequestBody body = parse_embedding_body(ex.request().body());
  const int dim = engine.model_info().dim;
  if (body.dimensions && *body.dimensions != dim) {
    throw_bad_request(concat("'dimensions': this model's embeddings have ", dim,
                             " dimensions and cannot be shortened; got ", *body.dimensions),
                      "dimensions", "invalid_value");
  }
  const Tokenizer& tokenizer = engine.tokenizer();
  std::vector<std::vector<TokenId>> prompts;
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    const EmbeddingInput& input = body.inputs[i];
    std::vector<TokenId> ids;
    if (input.text) {
      // The text is text: special-token markup in it is not turned into control tokens.
      ids = tokenizer.encode(*input.text, true, false);
    } else {
      for (int64_t id : input.ids) {
        if (id < 0 || id >= tokenizer.n_vocab()) {
          throw_bad_request(concat("input[", i, "]: ", id, " is not a token id (vocabulary size ",
                                   tokenizer.n_vocab(), ")"),
                            "input", "out_of_range");
        }
        ids.push_back(static_cast<TokenId>(id));
      }
    }
    if (ids.empty()) throw_bad_request(concat("input[", i, "] has no tokens"), "input");
    if (static_cast<int>(ids.size()) > engine.context_size()) {
      throw_bad_request(concat("input[", i, "] has ", ids.size(), " tokens; the context holds ",
                               engine.context_size()),
                        "input", "context_length_exceeded");
    }
    prompt_tokens += static_cast<int64_t>(ids.size());
    prompts.push_back(std::move(ids));
  }
  log.id = concat("embd-", next_response_id_++);
  log.prompt_tokens = static_cast<int>(prompt_tokens);
  log.served_by = "engine";

  const std::string pooling = engine.model_info().pooling;
  auto channel = std::make_shared<EventChannel>(co_await net::this_coro::executor);
  auto results = std::make_shared<EmbeddingResults>();
  results->finished.resize(prompts.size());
  std::vector<RequestId> ids;  // of the inputs submitted so far
  size_t n_finished = 0;
  const auto cancel_rest = [&] {
    for (RequestId id : ids) engine.cancel(id);
  };
  std::vector<std::vector<float>> vectors(prompts.size());
  auto next_client_check = std::chrono::steady_clock::now();
  int release_waits = 0;
  // As many inputs in the engine at once as its queue takes: a full queue only holds the rest
  // back until ours free their places (429 only when none of ours is in the engine).
  while (n_finished < prompts.size()) {
    bool waiting_for_release = false;
    while (ids.size() < prompts.size()) {
      const size_t i = ids.size();
      EngineRequest request;
      request.prompt = prompts[i];
      request.embedding = pooling;
      Admission r = engine.submit(request, [results, channel, i](const EngineEvent& e) {
        if (e.kind != EngineEvent::Kind::Finished) return;
        {
          std::lock_guard lock(results->mutex);
          results->finished[i] = e;
        }
        channel->push(static_cast<int>(i), e);
      });
      if (r.status == AdmissionStatus::Accepted) {
        ids.push_back(r.id);
        release_waits = 0;
        continue;
      }
      if (r.status == AdmissionStatus::QueueFull && ids.size() > n_finished) break;
      if (r.status == AdmissionStatus::QueueFull && !ids.empty() &&
          ++release_waits <= kMaxReleaseWaits) {
        waiting_for_release = true;
        break;
      }
      cancel_rest();
      if (r.status == AdmissionStatus::Invalid)
        throw_bad_request(concat("input[", i, "]: ", r.message), "input");
      throw ApiException(submit_error(r, config_.retry_after_s));
    }
    std::optional<ChoiceEvent> next =
        co_await channel->next(waiting_for_release ? kReleaseWait : kClientCheckInterval);
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_client_check &&
        (next_client_check = now + kClientCheckInterval, ex.peer_closed())) {
      cancel_rest();
      ex.close_after();
      co_return;  // nobody to answer
    }
    if (!next) continue;
    const EngineEvent* event = &next->event;
    ++n_finished;
    if (event->finish_reason != FinishReason::Stop) {
      cancel_rest();
      ApiError e;
      e.status = event->queue_timeout ? 503 : 500;
      e.type = event->queue_timeout ? "service_unavailable" : "server_error";
      e.code = event->queue_timeout ? "queue_timeout" : "internal_error";
      e.message =
          concat("embedding failed: ",
                 event->error.empty() ? finish_reason_name(event->finish_reason) : event->error);
      e.retry_after_s = event->queue_timeout ? config_.retry_after_s : 0;
      throw ApiException(e);
    }
  }
  {
    std::lock_guard lock(results->mutex);
    for (size_t i = 0; i < vectors.size(); ++i)
      vectors[i] = std::move(results->finished[i].embedding);
  }
  co_await ex.send(200, "application/json",
                   json_text(embedding_response(vectors, body.base64, model_name_, prompt_tokens)));
}

}  // namespace k25
