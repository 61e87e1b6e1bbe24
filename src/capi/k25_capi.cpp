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
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_metrics.h"
#include "flash/request_hints.h"
#include "k25.h"
#include "model/grammar.h"
#include "model/json_schema_grammar.h"

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
  std::vector<int32_t> top_tokens;         // and its alternatives
  std::vector<float> top_logprobs;
  bool finished_taken = false;  // polled: FINISHED was returned
};

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

void set_error(char** error, const std::string& message) {
  if (error) *error = copy_string(message);
}

// The C view of an event; its pointers point into `e` and the two vectors.
k25_event to_c_event(const k25::GenerationEvent& e, int64_t request_id,
                     std::vector<int32_t>& top_tokens, std::vector<float>& top_logprobs) {
  k25_event event{};
  event.kind = e.kind == k25::GenerationEvent::Kind::Token ? K25_EVENT_TOKEN : K25_EVENT_FINISHED;
  event.request_id = request_id;
  event.token = e.token;
  event.text = e.text.c_str();
  event.text_len = e.text.size();
  top_tokens.clear();
  top_logprobs.clear();
  if (e.logprobs) {
    event.logprob = e.logprobs->logprob;
    for (const auto& [token, logprob] : e.logprobs->top) {
      top_tokens.push_back(token);
      top_logprobs.push_back(logprob);
    }
    event.n_top = static_cast<int>(top_tokens.size());
    event.top_tokens = top_tokens.data();
    event.top_logprobs = top_logprobs.data();
  }
  event.finish_reason = k25::finish_reason_name(e.finish_reason);
  event.error = e.error.c_str();
  event.prompt_tokens = e.prompt_tokens;
  event.cached_tokens = e.cached_tokens;
  event.completion_tokens = e.completion_tokens;
  event.ttft_ms = e.ttft_ms;
  event.total_ms = e.total_ms;
  return event;
}

}  // namespace

struct k25_engine {
  std::unique_ptr<k25::Model> model;
  std::unique_ptr<k25::Engine> engine;
  std::mutex mutex;
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
};

extern "C" {

int k25_abi_version(void) {
  return K25_ABI_VERSION;
}

void k25_engine_options_init(k25_engine_options* options) {
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->n_threads = 0;
  options->max_batch_size = 24;
  options->max_queue = 256;
  options->context_size = 0;
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
    if (!engine || !request) k25::fail("k25_submit: engine and request are required");
    if (request->struct_size != sizeof(k25_request)) {
      k25::fail("k25_submit: request.struct_size is ", request->struct_size, ", this library's is ",
                sizeof(k25_request), " (built against another k25.h; use k25_request_init)");
    }
    k25::GenerationRequest r;
    if (request->prompt) {
      r.prompt =
          engine->model->tokenizer().encode(request->prompt, request->add_special != 0, true);
    } else if (request->prompt_tokens && request->n_prompt_tokens > 0) {
      const int n_vocab = engine->model->tokenizer().n_vocab();
      for (size_t i = 0; i < request->n_prompt_tokens; ++i) {
        const int32_t token = request->prompt_tokens[i];
        if (token < 0 || token >= n_vocab) {
          k25::fail("k25_submit: prompt_tokens[", i, "] = ", token, " is not a token id (", n_vocab,
                    " in the vocabulary)");
        }
        r.prompt.push_back(token);
      }
    } else {
      k25::fail("k25_submit: a prompt (text or tokens) is required");
    }
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
    r.ignore_eos = request->ignore_eos != 0;
    if (request->top_logprobs > 20) k25::fail("k25_submit: top_logprobs is at most 20");
    r.top_logprobs = request->top_logprobs < 0 ? -1 : request->top_logprobs;
    if (request->session_id) r.session_id = request->session_id;
    if (request->grammar && request->json_schema) {
      k25::fail("k25_submit: give grammar or json_schema, not both");
    }
    if (request->grammar) r.grammar = k25::compile_gbnf(request->grammar);
    if (request->json_schema) {
      const auto schema = nlohmann::ordered_json::parse(request->json_schema, nullptr, false);
      if (schema.is_discarded()) k25::fail("k25_submit: json_schema is not JSON");
      r.grammar = k25::compile_json_schema(schema);
    }

    auto state = std::make_shared<RequestState>();
    state->polled = callback == nullptr;
    // The id is known only once submit returns; events name it from the shared slot.
    auto id_slot = std::make_shared<std::atomic<int64_t>>(0);
    auto on_event = [engine, callback, user_data, state, id_slot](const k25::GenerationEvent& e) {
      const bool finished = e.kind == k25::GenerationEvent::Kind::Finished;
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
      std::vector<int32_t> top_tokens;
      std::vector<float> top_logprobs;
      const k25_event event = to_c_event(e, id, top_tokens, top_logprobs);
      callback(&event, user_data);
      if (!finished) return;
      {
        std::lock_guard lock(state->mutex);
        state->done = true;
        state->cv.notify_all();
      }
      engine->retire(id);
    };
    // Registered under the map's lock, so a k25_wait right after submit finds the id even when
    // the engine finishes first (its FINISHED callback waits for the lock to retire it).
    std::lock_guard lock(engine->mutex);
    k25::SubmitResult result = engine->engine->submit(std::move(r), on_event);
    if (result.status != k25::SubmitStatus::Accepted) k25::fail("k25_submit: ", result.message);
    const int64_t id = static_cast<int64_t>(result.id);
    id_slot->store(id);
    engine->requests[id] = state;
    return id;
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
    *event = to_c_event(state->current, request_id, state->top_tokens, state->top_logprobs);
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
