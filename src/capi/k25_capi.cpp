// The C API (include/k25.h) over k25::Engine.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_metrics.h"
#include "flash/request_hints.h"
#include "k25.h"

namespace {

// Completion of one request, shared by its callback and k25_wait.
struct RequestState {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
};

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void set_error(char** error, const std::string& message) {
  if (error) *error = copy_string(message);
}

}  // namespace

struct k25_engine {
  std::unique_ptr<k25::Model> model;
  std::unique_ptr<k25::Engine> engine;
  std::mutex mutex;
  std::unordered_map<int64_t, std::shared_ptr<RequestState>> requests;
};

extern "C" {

void k25_engine_options_init(k25_engine_options* options) {
  options->n_threads = 0;
  options->max_batch_size = 24;
  options->max_queue = 256;
  options->context_size = 0;
}

void k25_request_init(k25_request* request) {
  k25::SamplingParams defaults;
  std::memset(request, 0, sizeof *request);
  request->add_special = 1;
  request->max_tokens = 128;
  request->temperature = defaults.temperature;
  request->top_p = defaults.top_p;
  request->top_k = defaults.top_k;
  request->min_p = defaults.min_p;
  request->repeat_penalty = defaults.repeat_penalty;
}

k25_engine* k25_load(const char* model_path, const k25_engine_options* options, char** error) {
  try {
    if (!model_path) k25::fail("k25_load: model_path is NULL");
    k25_engine_options defaults;
    k25_engine_options_init(&defaults);
    const k25_engine_options& o = options ? *options : defaults;
    k25::EngineOptions engine_options;
    engine_options.n_threads = o.n_threads;
    engine_options.max_batch_size = o.max_batch_size > 0 ? o.max_batch_size : 24;
    engine_options.max_queue = o.max_queue >= 0 ? o.max_queue : 256;
    engine_options.context_size = o.context_size;
    auto handle = std::make_unique<k25_engine>();
    handle->model = k25::Model::load(model_path);
    handle->engine = std::make_unique<k25::Engine>(*handle->model, engine_options);
    return handle.release();
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return nullptr;
  }
}

int64_t k25_submit(k25_engine* engine, const k25_request* request, k25_token_callback callback,
                   void* user_data, char** error) {
  try {
    if (!engine || !request || !request->prompt || !callback) {
      k25::fail("k25_submit: engine, request, request->prompt and callback are required");
    }
    k25::GenerationRequest r;
    r.prompt = engine->model->tokenizer().encode(request->prompt, request->add_special != 0, true);
    r.max_tokens = request->max_tokens;
    r.sampling.temperature = request->temperature;
    r.sampling.top_p = request->top_p;
    r.sampling.top_k = request->top_k;
    r.sampling.min_p = request->min_p;
    r.sampling.repeat_penalty = request->repeat_penalty;
    if (request->has_seed) r.sampling.seed = request->seed;
    for (size_t i = 0; i < request->n_stop; ++i) {
      if (!request->stop[i] || !*request->stop[i]) k25::fail("k25_submit: empty stop string");
      r.stop.emplace_back(request->stop[i]);
    }
    k25::LatencySla sla = k25::LatencySla::Silver;
    if (request->latency_sla) {
      std::optional<k25::LatencySla> given = k25::parse_latency_sla(request->latency_sla);
      if (!given) {
        k25::fail("k25_submit: latency_sla must be gold, silver or bronze, got '",
                  request->latency_sla, "'");
      }
      sla = *given;
    }
    r.priority = k25::sla_priority(sla);
    if (request->domain_hint && !k25::is_known_domain(request->domain_hint)) {
      k25::fail("k25_submit: gate not found for domain '", request->domain_hint, "'");
    }
    auto state = std::make_shared<RequestState>();
    auto on_event = [callback, user_data, state](const k25::GenerationEvent& e) {
      k25_event event{};
      event.kind =
          e.kind == k25::GenerationEvent::Kind::Token ? K25_EVENT_TOKEN : K25_EVENT_FINISHED;
      event.token = e.token;
      event.text = e.text.c_str();
      event.text_len = e.text.size();
      event.finish_reason = k25::finish_reason_name(e.finish_reason);
      event.error = e.error.c_str();
      event.prompt_tokens = e.prompt_tokens;
      event.completion_tokens = e.completion_tokens;
      event.ttft_ms = e.ttft_ms;
      event.total_ms = e.total_ms;
      callback(&event, user_data);
      if (e.kind == k25::GenerationEvent::Kind::Finished) {
        std::lock_guard lock(state->mutex);
        state->done = true;
        state->done_cv.notify_all();
      }
    };
    // Registered under the map's lock, so a k25_wait right after submit finds the id even when
    // the engine finishes first.
    std::lock_guard lock(engine->mutex);
    k25::SubmitResult result = engine->engine->submit(std::move(r), on_event);
    if (result.status != k25::SubmitStatus::Accepted) k25::fail("k25_submit: ", result.message);
    engine->requests[static_cast<int64_t>(result.id)] = state;
    return static_cast<int64_t>(result.id);
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return 0;
  }
}

void k25_cancel(k25_engine* engine, int64_t request_id) {
  if (engine && request_id > 0) engine->engine->cancel(static_cast<k25::RequestId>(request_id));
}

int k25_wait(k25_engine* engine, int64_t request_id, int timeout_ms) {
  if (!engine) return -1;
  std::shared_ptr<RequestState> state;
  {
    std::lock_guard lock(engine->mutex);
    auto it = engine->requests.find(request_id);
    if (it == engine->requests.end()) return -1;
    state = it->second;
  }
  {
    std::unique_lock lock(state->mutex);
    auto done = [&] { return state->done; };
    if (timeout_ms < 0) {
      state->done_cv.wait(lock, done);
    } else if (!state->done_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
      return 1;
    }
  }
  std::lock_guard lock(engine->mutex);
  engine->requests.erase(request_id);
  return 0;
}

char* k25_metrics(k25_engine* engine) {
  if (!engine) return nullptr;
  return copy_string(k25::render_engine_metrics(engine->engine->stats()));
}

void k25_free_string(char* text) {
  std::free(text);
}

void k25_free(k25_engine* engine) {
  if (!engine) return;
  engine->engine->shutdown();
  delete engine;
}

}  // extern "C"
