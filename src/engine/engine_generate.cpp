#include "engine/engine_generate.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "core/error.h"
#include "engine/engine.h"

namespace k25 {

EngineGenerateResult generate_with_engine(Model& model, int n_threads,
                                          const std::vector<TokenId>& prompt,
                                          const GenerateOptions& options, SpeculativeMode mode,
                                          const std::function<void(const std::string&)>& on_text) {
  EngineOptions engine_options;
  engine_options.n_threads = n_threads;
  engine_options.max_batch_size = 1;
  engine_options.kv_dtype = options.kv_dtype;
  engine_options.prefix_cache = false;
  // The prompt in one forward call, so that every later call is a decode (or verify) step.
  const int n_prompt = static_cast<int>(prompt.size());
  engine_options.micro_task_tokens = std::max(engine_options.micro_task_tokens, n_prompt);
  engine_options.step_token_budget = std::max(engine_options.step_token_budget, n_prompt);
  Engine engine(model, engine_options);

  GenerationRequest request;
  request.prompt = prompt;
  request.max_tokens = options.n_predict;
  request.sampling = options.sampling;
  request.stop = options.stop;
  request.ignore_eos = options.ignore_eos;
  request.grammar = options.grammar;
  request.speculative = mode;

  EngineGenerateResult out;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  GenerationEvent finished;
  // Called on the engine thread; on_text runs there too, in order.
  const SubmitResult submitted = engine.submit(request, [&](const GenerationEvent& e) {
    if (!e.text.empty()) {
      out.result.text += e.text;
      if (on_text) on_text(e.text);
    }
    if (e.kind == GenerationEvent::Kind::Token) {
      out.result.tokens.push_back(e.token);
      return;
    }
    std::lock_guard lock(mutex);
    finished = e;
    done = true;
    done_cv.notify_all();
  });
  if (submitted.status != SubmitStatus::Accepted) fail("generate: ", submitted.message);
  {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return done; });
  }
  if (finished.finish_reason == FinishReason::Error) fail("generate: ", finished.error);
  out.result.finish_reason = finish_reason_name(finished.finish_reason);
  out.result.prefill_tokens = n_prompt;
  out.result.prefill_ms = finished.ttft_ms;
  out.result.decode_ms = finished.total_ms - finished.ttft_ms;
  out.drafted_tokens = finished.drafted_tokens;
  out.accepted_tokens = finished.accepted_tokens;
  const uint64_t calls = engine.stats().forward_calls.load();
  out.decode_forward_calls = calls > 0 ? calls - 1 : 0;
  return out;
}

}  // namespace k25
