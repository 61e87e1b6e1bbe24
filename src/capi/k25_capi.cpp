// The C API (include/k25.h) over k25::Engine.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "capi/c_structs.h"
#include "capi/engine_handle.h"
#include "capi/engine_settings.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_metrics.h"
#include "flash/flash_planner.h"
#include "k25.h"
#include "kernels/kernel_table.h"

namespace {

// Finished requests remembered for k25_wait (and polled ones whose FINISHED was taken): older
// ones are forgotten, so that a caller that never waits holds no memory.
constexpr size_t kFinishedKept = 1024;

// One request's completion and, when it is polled, its events.
struct RequestState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  bool polled = false;                     // submitted without a callback
  std::deque<k25::GenerationEvent> queue;  // polled: events not taken yet
  k25::GenerationEvent current;            // polled: the event last returned (owns its text)
  k25::capi::EventBuffers buffers;         // and the rest of its C view
  bool finished_taken = false;             // polled: FINISHED was returned
  // Positions the engine computed for it (k25_progress).
  std::shared_ptr<std::atomic<int64_t>> progress = std::make_shared<std::atomic<int64_t>>(0);
};

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void set_error(char** error, const std::string& message) {
  if (error) *error = copy_string(message);
}

// Why a request was refused, for k25_submit_info (the message goes to `error`).
struct Refusal : k25::Error {
  Refusal(k25_status status_, const std::string& message) : k25::Error(message), status(status_) {}
  k25_status status;
};

[[noreturn]] void refuse(k25_status status, const std::string& message) {
  throw Refusal(status, message);
}

k25_status submit_status(k25::SubmitStatus status) {
  switch (status) {
    case k25::SubmitStatus::Accepted:
      return K25_OK;
    case k25::SubmitStatus::QueueFull:
      return K25_QUEUE_FULL;
    case k25::SubmitStatus::ShuttingDown:
      return K25_SHUTTING_DOWN;
    case k25::SubmitStatus::Invalid:
      return K25_INVALID_REQUEST;
  }
  return K25_FAILED;
}

}  // namespace

struct k25_engine {
  std::unique_ptr<k25::Model> owned_model;  // k25_load's; null around a caller's model
  k25::Model* model = nullptr;
  std::unique_ptr<k25::Engine> engine;
  std::unique_ptr<k25::FlashPlanner> flash;  // fingerprint and compute plan (R-FP, R-PR)
  bool adaptive_pruning = true;              // Level 3 for requests with a pruned plan
  k25::SpeculativeMode speculative = k25::SpeculativeMode::kOff;  // requests' default
  std::mutex mutex;
  std::set<std::string, std::less<>> domains;  // k25_submit_info.domain points into it
  std::unordered_map<int64_t, std::shared_ptr<RequestState>> requests;
  std::deque<int64_t> finished;  // oldest first, at most kFinishedKept

  // A request is complete from the caller's side: remembered a while, then forgotten.
  void retire(int64_t id) {
    std::lock_guard lock(mutex);
    finished.push_back(id);
    while (finished.size() > kFinishedKept) {
      requests.erase(finished.front());
      finished.pop_front();
    }
  }
  std::shared_ptr<RequestState> find(int64_t id) {
    std::lock_guard lock(mutex);
    auto it = requests.find(id);
    return it == requests.end() ? nullptr : it->second;
  }
  const char* interned_domain(const std::string& domain) {
    std::lock_guard lock(mutex);
    return domains.insert(domain).first->c_str();
  }
};

namespace k25 {

k25_engine* engine_handle_around(Model& model, const EngineSetup& setup,
                                 const std::string& model_path) {
  auto handle = std::make_unique<k25_engine>();
  handle->model = &model;
  handle->flash = std::make_unique<FlashPlanner>(model.config(), model_path, setup.flash);
  handle->adaptive_pruning = setup.flash.adaptive;
  handle->speculative = setup.speculative;
  handle->engine = std::make_unique<Engine>(model, setup.engine);
  return handle.release();
}

Engine& engine_behind(k25_engine* handle) {
  return *handle->engine;
}

}  // namespace k25

extern "C" {

int k25_abi_version(void) {
  return K25_ABI_VERSION;
}

const char* k25_kernel_isa(char** error) {
  try {
    return k25::kernels().isa;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return nullptr;
  }
}

void k25_engine_options_init(k25_engine_options* options) {
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->n_threads = 0;
  options->max_batch_size = 24;
  options->max_queue = 256;
  options->context_size = 0;
}

int k25_check_setting(const char* setting, char** error) {
  try {
    if (!setting) k25::fail("k25_check_setting: setting is NULL");
    k25::EngineSetup scratch;
    k25::apply_engine_setting(scratch, setting);
    return 0;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return -1;
  }
}

void k25_request_init(k25_request* request) {
  k25::SamplingParams defaults;
  std::memset(request, 0, sizeof *request);
  request->struct_size = sizeof *request;
  request->add_special = 1;
  request->top_logprobs = -1;
  request->max_tokens = 128;
  request->temperature = defaults.temperature;
  request->top_p = defaults.top_p;
  request->top_k = defaults.top_k;
  request->min_p = defaults.min_p;
  request->repeat_penalty = defaults.repeat_penalty;
  request->repeat_last_n = defaults.repeat_last_n;
  request->presence_penalty = defaults.presence_penalty;
  request->frequency_penalty = defaults.frequency_penalty;
  request->pruning = 1;
}

k25_engine* k25_load(const char* model_path, const k25_engine_options* options, char** error) {
  try {
    if (!model_path) k25::fail("k25_load: model_path is NULL");
    k25_engine_options defaults;
    k25_engine_options_init(&defaults);
    const k25_engine_options& o = options ? *options : defaults;
    if (o.struct_size != sizeof(k25_engine_options)) {
      k25::fail("k25_load: options.struct_size is ", o.struct_size, ", this library's is ",
                sizeof(k25_engine_options), " (built against another k25.h; use ",
                "k25_engine_options_init)");
    }
    k25::EngineSetup setup;
    setup.engine.n_threads = o.n_threads;
    setup.engine.max_batch_size = o.max_batch_size > 0 ? o.max_batch_size : 24;
    setup.engine.max_queue = o.max_queue >= 0 ? o.max_queue : 256;
    setup.engine.context_size = o.context_size;
    for (size_t i = 0; i < o.n_settings; ++i) {
      if (!o.settings || !o.settings[i]) k25::fail("k25_load: settings[", i, "] is NULL");
      k25::apply_engine_setting(setup, o.settings[i]);
    }
    k25::finish_engine_setup(setup, model_path);
    std::unique_ptr<k25::Model> model = k25::Model::load(model_path);
    k25_engine* handle = k25::engine_handle_around(*model, setup, model_path);
    handle->owned_model = std::move(model);
    return handle;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return nullptr;
  }
}

void k25_submit_info_init(k25_submit_info* info) {
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

int64_t k25_submit(k25_engine* engine, const k25_request* request, k25_token_callback callback,
                   void* user_data, k25_submit_info* info, char** error) {
  if (info && info->struct_size != sizeof(k25_submit_info)) {
    set_error(error, k25::concat("k25_submit: info.struct_size is ", info->struct_size,
                                 ", this library's is ", sizeof(k25_submit_info),
                                 " (use k25_submit_info_init)"));
    return 0;
  }
  const auto refused = [&](k25_status status, const std::string& message) -> int64_t {
    if (info) info->status = status;
    set_error(error, message);
    return 0;
  };
  try {
    if (!engine || !request)
      refuse(K25_INVALID_REQUEST, "k25_submit: engine and request are required");
    if (request->struct_size != sizeof(k25_request)) {
      refuse(K25_INVALID_REQUEST,
             k25::concat("k25_submit: request.struct_size is ", request->struct_size,
                         ", this library's is ", sizeof(k25_request),
                         " (built against another k25.h; use k25_request_init)"));
    }
    k25::GenerationRequest r =
        k25::capi::to_generation_request(*request, engine->model->tokenizer(), engine->speculative);
    // R-FP / R-PR: the fingerprint and compute plan, before the engine sees the request.
    k25::FingerprintInput fingerprint;
    fingerprint.prompt_text = request->fingerprint_text ? request->fingerprint_text
                              : request->prompt         ? request->prompt
                                                        : "";
    fingerprint.prompt_tokens = static_cast<int>(r.prompt.size());
    fingerprint.max_tokens = r.max_tokens;
    if (request->response_length > 0) fingerprint.response_length_hint = request->response_length;
    fingerprint.priority = r.priority;
    if (request->domain_hint) {
      if (!engine->flash->knows_domain(request->domain_hint)) {
        refuse(K25_UNKNOWN_DOMAIN,
               k25::concat("k25_submit: gate not found for domain '", request->domain_hint, "'"));
      }
      fingerprint.domain_hint = request->domain_hint;
      fingerprint.domain_given = true;
    }
    // Embeddings run the whole model and stay out of Flash's counters.
    const bool planned = !r.embedding;
    const k25::FlashResult flash =
        planned ? engine->flash->plan(fingerprint, request->pruning == 0) : k25::FlashResult{};
    r.plan = flash.decision.plan;
    r.adaptive_pruning = engine->adaptive_pruning && flash.decision.level > 0;
    r.max_compute_saved = flash.decision.max_saved;

    auto state = std::make_shared<RequestState>();
    state->polled = callback == nullptr;
    r.progress = state->progress;
    // The id is known only once submit returns; events name it from the shared slot.
    auto id_slot = std::make_shared<std::atomic<int64_t>>(0);
    auto on_event = [engine, callback, user_data, state, id_slot, planned,
                     decision = flash.decision](const k25::GenerationEvent& e) {
      const bool finished = e.kind == k25::GenerationEvent::Kind::Finished;
      if (finished && planned) {
        engine->flash->record_finished(decision, e.prompt_tokens + e.completion_tokens);
      }
      if (state->polled) {
        std::lock_guard lock(state->mutex);
        state->queue.push_back(e);
        state->done = state->done || finished;
        state->cv.notify_all();
        return;
      }
      int64_t id = id_slot->load();
      if (id == 0) {
        // The engine ran ahead of k25_submit, which sets the id under this lock.
        std::lock_guard lock(engine->mutex);
        id = id_slot->load();
      }
      k25::capi::EventBuffers buffers;
      const k25_event event = k25::capi::to_c_event(e, id, buffers);
      callback(&event, user_data);
      if (!finished) return;
      {
        std::lock_guard lock(state->mutex);
        state->done = true;
        state->cv.notify_all();
      }
      engine->retire(id);
    };
    const int n_prompt = static_cast<int>(r.prompt.size());
    // Registered under the map's lock, so a k25_wait right after submit finds the id even when
    // the engine finishes first (its FINISHED callback waits for the lock to retire it).
    int64_t id = 0;
    {
      std::lock_guard lock(engine->mutex);
      k25::SubmitResult result = engine->engine->submit(std::move(r), on_event);
      if (result.status != k25::SubmitStatus::Accepted) {
        refuse(submit_status(result.status), "k25_submit: " + result.message);
      }
      id = static_cast<int64_t>(result.id);
      id_slot->store(id);
      engine->requests[id] = state;
    }
    if (info) {
      info->status = K25_OK;
      info->domain = engine->interned_domain(flash.fingerprint.domain);
      info->flash_level = flash.decision.level;
      info->compute_saved = flash.decision.compute_saved;
      info->plan = copy_string(flash.decision.plan ? flash.decision.plan->describe() : "full");
      info->prompt_tokens = n_prompt;
    }
    return id;
  } catch (const Refusal& e) {
    return refused(e.status, e.what());
  } catch (const k25::Error& e) {
    return refused(K25_INVALID_REQUEST, e.what());
  } catch (const std::exception& e) {
    return refused(K25_FAILED, e.what());
  }
}

int64_t k25_progress(k25_engine* engine, int64_t request_id) {
  if (!engine) return -1;
  std::shared_ptr<RequestState> state = engine->find(request_id);
  return state ? state->progress->load(std::memory_order_relaxed) : -1;
}

int k25_n_active(k25_engine* engine) {
  return engine ? static_cast<int>(engine->engine->n_active()) : 0;
}

void k25_cancel_all(k25_engine* engine) {
  if (engine) engine->engine->cancel_all();
}

int k25_knows_domain(const k25_engine* engine, const char* domain) {
  return engine && domain && engine->flash->knows_domain(domain) ? 1 : 0;
}

void k25_cancel(k25_engine* engine, int64_t request_id) {
  if (engine && request_id > 0) engine->engine->cancel(static_cast<k25::RequestId>(request_id));
}

int k25_wait(k25_engine* engine, int64_t request_id, int timeout_ms) {
  if (!engine) return -1;
  std::shared_ptr<RequestState> state = engine->find(request_id);
  if (!state) return -1;
  {
    std::unique_lock lock(state->mutex);
    auto done = [&] { return state->done; };
    if (timeout_ms < 0) {
      state->cv.wait(lock, done);
    } else if (!state->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
      return 1;
    }
    if (state->polled) return 0;  // its events are still to be taken
  }
  std::lock_guard lock(engine->mutex);
  engine->requests.erase(request_id);
  return 0;
}

int k25_next_event(k25_engine* engine, int64_t request_id, k25_event* event, int timeout_ms) {
  if (!engine || !event) return -1;
  std::shared_ptr<RequestState> state = engine->find(request_id);
  if (!state || !state->polled) return -1;
  bool finished = false;
  {
    std::unique_lock lock(state->mutex);
    if (state->finished_taken) return -1;
    auto ready = [&] { return !state->queue.empty(); };
    if (timeout_ms < 0) {
      state->cv.wait(lock, ready);
    } else if (!state->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
      return 1;
    }
    state->current = std::move(state->queue.front());
    state->queue.pop_front();
    *event = k25::capi::to_c_event(state->current, request_id, state->buffers);
    finished = state->current.kind == k25::GenerationEvent::Kind::Finished;
    state->finished_taken = finished;
  }
  if (finished) engine->retire(request_id);  // the event's storage lives until it is forgotten
  return 0;
}

int k25_n_vocab(const k25_engine* engine) {
  return engine ? engine->model->tokenizer().n_vocab() : 0;
}

int k25_context_size(const k25_engine* engine) {
  return engine ? engine->engine->context_size() : 0;
}

int k25_get_model_info(const k25_engine* engine, k25_model_info* info) {
  if (!engine || !info || info->struct_size != sizeof(k25_model_info)) return -1;
  const k25::ModelConfig& c = engine->model->config();
  info->name = c.name.c_str();
  info->architecture = k25::arch_name(c.arch);
  info->n_vocab = c.n_vocab;
  info->context_length = c.context_length;
  info->dim = c.dim;
  info->n_layers = c.n_layers;
  info->n_heads = c.n_heads;
  info->pooling = k25::pooling_name(c.pooling);
  info->isa = k25::kernels().isa;
  return 0;
}

int64_t k25_tokenize(const k25_engine* engine, const char* text, int add_special, int32_t* tokens,
                     size_t capacity, char** error) {
  try {
    if (!engine || !text) k25::fail("k25_tokenize: engine and text are required");
    const std::vector<k25::TokenId> ids =
        engine->model->tokenizer().encode(text, add_special != 0, true);
    if (tokens) std::copy_n(ids.begin(), std::min(capacity, ids.size()), tokens);
    return static_cast<int64_t>(ids.size());
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return -1;
  }
}

char* k25_detokenize(const k25_engine* engine, const int32_t* tokens, size_t n, char** error) {
  try {
    if (!engine || (!tokens && n > 0)) k25::fail("k25_detokenize: engine and tokens are required");
    const k25::Tokenizer& tokenizer = engine->model->tokenizer();
    std::vector<k25::TokenId> ids(tokens, tokens + n);
    for (size_t i = 0; i < n; ++i) {
      if (ids[i] < 0 || ids[i] >= tokenizer.n_vocab()) {
        k25::fail("k25_detokenize: tokens[", i, "] = ", ids[i], " is not a token id");
      }
    }
    return copy_string(tokenizer.decode(ids, true));
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return nullptr;
  }
}

char* k25_metrics(k25_engine* engine) {
  if (!engine) return nullptr;
  return copy_string(k25::render_engine_metrics(engine->engine->stats()) +
                     engine->flash->render_metrics());
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
