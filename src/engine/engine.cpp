#include "engine/engine.h"

#include <algorithm>

#include "model/kv_cache.h"
#include "util/error.h"

namespace k25 {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "error";
}

struct Engine::Sequence {
  Sequence(RequestId id_, GenerationRequest request_, EventCallback on_event_, int n_vocab)
      : id(id_),
        request(std::move(request_)),
        on_event(std::move(on_event_)),
        sampler(request.sampling, n_vocab),
        stop_matcher(request.stop),
        tokens(request.prompt),
        submitted(Clock::now()) {}

  RequestId id;
  GenerationRequest request;
  EventCallback on_event;
  Sampler sampler;
  StopMatcher stop_matcher;
  Utf8StreamDecoder utf8;
  std::vector<TokenId> tokens;  // prompt, then generated tokens
  int n_computed = 0;           // tokens whose K/V are in the cache
  int n_generated = 0;
  int slot = -1;
  bool finished = false;
  bool stop_string_matched = false;  // the output already ends just before a stop string
  bool has_first_token = false;
  Clock::time_point submitted;
  Clock::time_point last_token;
  double ttft_ms = 0;

  bool decoding() const { return n_computed >= static_cast<int>(request.prompt.size()); }
};

namespace {
double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

Engine::Engine(Model& model, EngineOptions options, std::unique_ptr<SchedulingPolicy> policy)
    : model_(model), options_(options), policy_(std::move(policy)) {
  if (options_.max_batch_size < 1) fail("engine: max_batch_size must be >= 1");
  if (options_.max_queue < 0) fail("engine: max_queue must be >= 0");
  const int model_context = model_.config().context_length;
  context_size_ =
      options_.context_size <= 0 ? model_context : std::min(options_.context_size, model_context);
  if (context_size_ < 2) fail("engine: context size ", context_size_, " is too small");
  if (!policy_) policy_ = make_first_come_policy(options_.step_token_budget);
  int n_threads = options_.n_threads > 0 ? options_.n_threads
                                         : static_cast<int>(std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(std::max(1, n_threads));
  kv_ = model_.make_kv_cache();
  for (int slot = options_.max_batch_size - 1; slot >= 0; --slot) free_slots_.push_back(slot);
  thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  shutdown();
}

SubmitResult Engine::submit(GenerationRequest request, EventCallback on_event) {
  SubmitResult result;
  const int n_prompt = static_cast<int>(request.prompt.size());
  if (n_prompt == 0) {
    return {SubmitStatus::Invalid, 0, "the prompt has no tokens"};
  }
  if (n_prompt >= context_size_) {
    return {SubmitStatus::Invalid, 0,
            concat("the prompt has ", n_prompt, " tokens; the context holds ", context_size_,
                   " (prompt and at least one generated token)")};
  }
  if (request.max_tokens < 1) return {SubmitStatus::Invalid, 0, "max_tokens must be >= 1"};
  const int n_vocab = model_.config().n_vocab;
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= n_vocab) {
      return {SubmitStatus::Invalid, 0, concat("prompt token ", t, " is outside the vocabulary")};
    }
  }
  std::unique_ptr<Sequence> seq;
  try {
    seq = std::make_unique<Sequence>(0, std::move(request), std::move(on_event), n_vocab);
  } catch (const Error& e) {
    return {SubmitStatus::Invalid, 0, e.what()};
  }
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return {SubmitStatus::ShuttingDown, 0, "the engine is shutting down"};
    // Free slots take requests at the next step, so they count as room besides the queue.
    const int capacity = options_.max_queue + options_.max_batch_size - n_running_shared_;
    if (static_cast<int>(waiting_.size()) >= capacity) {
      return {SubmitStatus::QueueFull, 0,
              concat("the queue is full (", options_.max_queue, " requests waiting)")};
    }
    seq->id = next_id_++;
    result.id = seq->id;
    waiting_.push_back(std::move(seq));
    stats_.requests_waiting = static_cast<int64_t>(waiting_.size());
  }
  wake_.notify_one();
  return result;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancel_requests_.insert(id);
  }
  wake_.notify_one();
}

void Engine::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_everything_ = true;
  }
  wake_.notify_one();
}

void Engine::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

int Engine::n_active() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(waiting_.size()) + n_running_shared_;
}

void Engine::run() {
  for (;;) {
    bool stop = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || cancel_everything_ || !cancel_requests_.empty() || !waiting_.empty() ||
               !running_.empty();
      });
      if (stopping_) {
        cancel_everything_ = true;
        stop = true;
      }
    }
    apply_cancellations();
    if (stop) {
      release_finished();
      return;
    }
    admit_waiting();
    step();
    release_finished();
  }
}

void Engine::apply_cancellations() {
  std::unordered_set<RequestId> ids;
  bool everything = false;
  std::vector<std::unique_ptr<Sequence>> dropped;  // waiting ones: they never got a slot
  {
    std::lock_guard lock(mutex_);
    ids.swap(cancel_requests_);
    everything = cancel_everything_;
    cancel_everything_ = false;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (everything || ids.count((*it)->id)) {
        dropped.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    stats_.requests_waiting = static_cast<int64_t>(waiting_.size());
  }
  for (auto& seq : dropped) finish(*seq, FinishReason::Cancelled);
  for (auto& seq : running_) {
    if (everything || ids.count(seq->id)) finish(*seq, FinishReason::Cancelled);
  }
}

void Engine::admit_waiting() {
  std::lock_guard lock(mutex_);
  int n =
      policy_->n_to_admit(static_cast<int>(waiting_.size()), static_cast<int>(free_slots_.size()));
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<Sequence> seq = std::move(waiting_.front());
    waiting_.pop_front();
    seq->slot = free_slots_.back();
    free_slots_.pop_back();
    stats_.prompt_tokens += seq->request.prompt.size();
    running_.push_back(std::move(seq));
  }
  n_running_shared_ = static_cast<int>(running_.size());
  stats_.requests_waiting = static_cast<int64_t>(waiting_.size());
  stats_.requests_running = n_running_shared_;
}

void Engine::step() {
  std::vector<SequenceView> views;
  for (size_t i = 0; i < running_.size(); ++i) {
    const Sequence& s = *running_[i];
    if (s.finished) continue;
    views.push_back({static_cast<int>(i), s.request.priority,
                     static_cast<int>(s.tokens.size()) - s.n_computed, s.decoding()});
  }
  std::vector<StepSlice> slices = policy_->plan_step(views);
  if (slices.empty()) return;

  std::vector<BatchToken> batch;
  std::vector<std::pair<Sequence*, int>> in_batch;  // sequence, tokens it has in the batch
  std::vector<Sequence*> wanting_logits;            // in batch order
  for (const StepSlice& slice : slices) {
    Sequence& seq = *running_.at(slice.index);
    const int n_pending = static_cast<int>(seq.tokens.size()) - seq.n_computed;
    const int n = std::min(slice.n_tokens, n_pending);
    if (n <= 0) continue;
    try {
      kv_->reserve(seq.slot, seq.n_computed + n);
    } catch (const Error& e) {
      finish(seq, FinishReason::Error, e.what());
      continue;
    }
    for (int j = 0; j < n; ++j) {
      const int pos = seq.n_computed + j;
      const bool last = pos + 1 == static_cast<int>(seq.tokens.size());
      batch.push_back({seq.tokens[pos], pos, seq.slot, last});
      if (last) wanting_logits.push_back(&seq);
    }
    in_batch.push_back({&seq, n});
  }
  if (batch.empty()) return;

  const int n_vocab = model_.config().n_vocab;
  logits_.resize(wanting_logits.size() * static_cast<size_t>(n_vocab));
  if (options_.debug_step_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.debug_step_delay_ms));
  }
  try {
    model_.forward(batch, *kv_, logits_.data(), *pool_);
  } catch (const std::exception& e) {
    for (auto& [seq, n] : in_batch) finish(*seq, FinishReason::Error, e.what());
    return;
  }
  ++stats_.forward_calls;
  for (auto& [seq, n] : in_batch) seq->n_computed += n;
  for (size_t row = 0; row < wanting_logits.size(); ++row) {
    on_logits(*wanting_logits[row], logits_.data() + row * static_cast<size_t>(n_vocab));
  }
}

void Engine::on_logits(Sequence& seq, float* logits) {
  const Tokenizer& tokenizer = model_.tokenizer();
  const int n_vocab = model_.config().n_vocab;
  GenerationEvent event;
  if (seq.request.top_logprobs >= 0) {
    // The sampler rewrites logits in place; logprobs are of the raw distribution.
    std::vector<float> raw(logits, logits + n_vocab);
    TokenId token = seq.sampler.sample(logits, seq.tokens);
    event.logprobs = compute_logprobs(raw.data(), n_vocab, token, seq.request.top_logprobs);
    event.token = token;
  } else {
    event.token = seq.sampler.sample(logits, seq.tokens);
  }
  const Clock::time_point now = Clock::now();
  if (!seq.has_first_token) {
    seq.has_first_token = true;
    seq.ttft_ms = ms_between(seq.submitted, now);
    stats_.ttft_seconds.observe(seq.ttft_ms / 1000.0);
  } else {
    stats_.inter_token_seconds.observe(ms_between(seq.last_token, now) / 1000.0);
  }
  seq.last_token = now;
  ++seq.n_generated;
  ++stats_.completion_tokens;
  seq.tokens.push_back(event.token);

  const auto& stop_tokens = seq.request.stop_tokens;
  if (tokenizer.is_end_of_generation(event.token) ||
      std::find(stop_tokens.begin(), stop_tokens.end(), event.token) != stop_tokens.end()) {
    finish(seq, FinishReason::Stop);
    return;
  }
  StopMatcher::Result matched =
      seq.stop_matcher.push(seq.utf8.push(tokenizer.token_to_piece(event.token, false)));
  event.text = std::move(matched.emit);
  seq.on_event(event);
  if (matched.stopped) {
    // The text before the stop string went out with this token; nothing is held back any more.
    seq.stop_string_matched = true;
    finish(seq, FinishReason::Stop);
    return;
  }
  if (seq.n_generated >= seq.request.max_tokens ||
      static_cast<int>(seq.tokens.size()) >= context_size_) {
    finish(seq, FinishReason::Length);
  }
}

void Engine::finish(Sequence& seq, FinishReason reason, std::string error) {
  if (seq.finished) return;
  seq.finished = true;
  GenerationEvent event;
  event.kind = GenerationEvent::Kind::Finished;
  if (!seq.stop_string_matched && reason != FinishReason::Error) {
    // Release what the UTF-8 decoder and the stop matcher still hold.
    StopMatcher::Result tail = seq.stop_matcher.push(seq.utf8.flush());
    event.text = std::move(tail.emit);
    if (!tail.stopped) event.text += seq.stop_matcher.flush();
  }
  event.finish_reason = reason;
  event.error = std::move(error);
  event.prompt_tokens = static_cast<int>(seq.request.prompt.size());
  event.completion_tokens = seq.n_generated;
  event.ttft_ms = seq.ttft_ms;
  event.total_ms = ms_between(seq.submitted, Clock::now());
  ++stats_.requests_finished[static_cast<int>(reason)];
  stats_.request_seconds.observe(event.total_ms / 1000.0);
  seq.on_event(event);
}

void Engine::release_finished() {
  bool released = false;
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->finished) {
      kv_->clear((*it)->slot);
      free_slots_.push_back((*it)->slot);
      it = running_.erase(it);
      released = true;
    } else {
      ++it;
    }
  }
  if (auto* contiguous = dynamic_cast<ContiguousKvCache*>(kv_.get())) {
    stats_.kv_bytes_used = contiguous->bytes_used();
  }
  if (released) {
    std::lock_guard lock(mutex_);
    n_running_shared_ = static_cast<int>(running_.size());
    stats_.requests_running = n_running_shared_;
  }
}

}  // namespace k25
