#include "server/warmup.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "server/flash_headers.h"

namespace k25 {

namespace {

// What the engine callbacks report back to the warm-up thread.
struct WarmupProgress {
  std::mutex mutex;
  std::condition_variable changed;
  int in_flight = 0;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  std::string error;
};

}  // namespace

WarmupReport run_warmup(EngineClient& engine, const std::vector<WarmupPrompt>& prompts,
                        int max_tokens) {
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer& tokenizer = engine.tokenizer();
  auto progress = std::make_shared<WarmupProgress>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const WarmupPrompt& p = prompts[i];
    if (!engine.knows_domain(p.domain)) {
      fail("warmup[", i, "]: no gate for domain '", p.domain, "'");
    }
    EngineRequest request;
    request.domain_hint = p.domain;  // so that its gate runs too
    request.fingerprint_text = p.prompt;
    request.prompt = tokenizer.encode(p.prompt, true, true);
    if (request.prompt.empty()) fail("warmup[", i, "]: the prompt has no tokens");
    if (static_cast<int>(request.prompt.size()) >= engine.context_size()) {
      fail("warmup[", i, "]: the prompt has ", request.prompt.size(), " tokens; the context holds ",
           engine.context_size());
    }
    request.max_tokens = max_tokens;
    request.sampling.temperature = 0;
    for (;;) {
      {
        std::lock_guard lock(progress->mutex);
        ++progress->in_flight;
      }
      Admission r = engine.submit(request, [progress](const EngineEvent& e) {
        if (e.kind != EngineEvent::Kind::Finished) return;
        std::lock_guard lock(progress->mutex);
        --progress->in_flight;
        progress->prompt_tokens += e.prompt_tokens;
        progress->completion_tokens += e.completion_tokens;
        if (e.finish_reason == FinishReason::Error && progress->error.empty()) {
          progress->error = e.error;
        }
        progress->changed.notify_all();
      });
      if (r.status == AdmissionStatus::Accepted) break;
      std::unique_lock lock(progress->mutex);
      --progress->in_flight;
      if (r.status != AdmissionStatus::QueueFull || progress->in_flight == 0) {
        fail("warmup[", i, "]: the engine refused the prompt: ", r.message);
      }
      // The queue is full: wait for one warm-up request to finish, then submit again.
      const int before = progress->in_flight;
      progress->changed.wait(lock, [&] { return progress->in_flight < before; });
    }
  }
  std::unique_lock lock(progress->mutex);
  progress->changed.wait(lock, [&] { return progress->in_flight == 0; });
  if (!progress->error.empty()) fail("warmup: a prompt failed: ", progress->error);
  WarmupReport report;
  report.requests = static_cast<int>(prompts.size());
  report.prompt_tokens = progress->prompt_tokens;
  report.completion_tokens = progress->completion_tokens;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace k25
