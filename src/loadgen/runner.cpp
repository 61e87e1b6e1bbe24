#include "loadgen/runner.h"

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "loadgen/progress.h"
#include "loadgen/sse_client.h"

namespace k25::loadgen {

using nlohmann::json;

std::string session_turn_text(const std::string& user_line) {
  return "\nUser: " + user_line + "\nAssistant:";
}

std::vector<PreparedRequest> prepare_requests(const std::vector<PlannedRequest>& plan,
                                              const PromptBuilder& builder) {
  std::vector<PreparedRequest> out;
  for (const PlannedRequest& p : plan) {
    BuiltPrompt prompt = builder.build(p.prompt_tokens, p.text_offset);
    out.push_back({p, std::move(prompt.text), prompt.tokens});
  }
  return out;
}

std::vector<PreparedSession> prepare_sessions(const std::vector<PlannedSession>& plan,
                                              const PromptBuilder& builder) {
  std::vector<PreparedSession> out;
  for (const PlannedSession& p : plan) {
    PreparedSession s;
    s.plan = p;
    s.history = builder.build(p.history_tokens, p.text_offset).text;
    // User lines come from elsewhere in the text than the history (offsets far apart).
    for (size_t t = 0; t < p.user_line_tokens.size(); ++t) {
      s.user_lines.push_back(
          builder.build(p.user_line_tokens[t], p.text_offset / 2 + 7919 * (t + 1)).text);
    }
    s.first_prompt_tokens = builder.count(s.history + session_turn_text(s.user_lines[0]));
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// Permits handed to waiters in arrival order; 0 permits = unlimited.
class AsyncSemaphore {
 public:
  explicit AsyncSemaphore(int permits) : free_(permits), unlimited_(permits <= 0) {}

  net::awaitable<void> acquire() {
    if (unlimited_ || free_ > 0) {
      --free_;
      co_return;
    }
    net::steady_timer wake(co_await net::this_coro::executor, Clock::time_point::max());
    waiters_.push_back(&wake);
    beast::error_code ec;
    // release() cancels the timer once it has handed this waiter the permit.
    co_await wake.async_wait(net::redirect_error(net::use_awaitable, ec));
  }

  void release() {
    if (unlimited_) return;
    if (waiters_.empty()) {
      ++free_;
      return;
    }
    net::steady_timer* next = waiters_.front();
    waiters_.pop_front();
    next->cancel();
  }

 private:
  int free_;
  bool unlimited_;
  std::deque<net::steady_timer*> waiters_;
};

class Run {
 public:
  Run(const RunOptions& options, int planned)
      : options_(options),
        url_(HttpUrl::parse(options.url, "--url")),
        slots_(options.concurrency),
        deadline_timer_(ioc_),
        arrival_timer_(ioc_),
        progress_timer_(ioc_),
        progress_(options.progress) {
    result_.planned = planned;
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    auto resolved = resolver.resolve(url_.host, url_.port, ec);
    if (ec) fail("--url: cannot resolve ", url_.host, ": ", ec.message());
    for (const auto& entry : resolved) endpoints_.push_back(entry.endpoint());
  }

  RunResult run_requests(const std::vector<PreparedRequest>& requests) {
    return run([&]() -> net::awaitable<void> {
      for (size_t i = 0; i < requests.size(); ++i) {
        if (!co_await wait_for_arrival(requests[i].plan.arrival_s)) {
          result_.not_started += static_cast<int>(requests.size() - i);
          break;
        }
        spawn(request_task(requests[i]));
      }
    });
  }

  RunResult run_sessions(const std::vector<PreparedSession>& sessions) {
    return run([&]() -> net::awaitable<void> {
      for (size_t i = 0; i < sessions.size(); ++i) {
        if (!co_await wait_for_arrival(sessions[i].plan.arrival_s)) {
          for (size_t j = i; j < sessions.size(); ++j) {
            result_.not_started += static_cast<int>(sessions[j].user_lines.size());
          }
          break;
        }
        spawn(session_task(sessions[i], static_cast<int>(i)));
      }
    });
  }

 private:
  struct Sent {
    RequestRecord record;
    std::string text;
  };

  template <class Dispatch>
  RunResult run(Dispatch dispatch) {
    t0_ = Clock::now();
    net::co_spawn(
        ioc_,
        [&, dispatch]() -> net::awaitable<void> {
          co_await dispatch();
          dispatcher_done_ = true;
          maybe_finish();
        },
        net::detached);
    if (options_.duration_s) net::co_spawn(ioc_, deadline(), net::detached);
    net::co_spawn(ioc_, progress_loop(), net::detached);
    ioc_.run();
    progress_.finish(progress_state());
    result_.wall_s = ms_between(t0_, Clock::now()) / 1000.0;
    std::sort(result_.records.begin(), result_.records.end(),
              [](const RequestRecord& a, const RequestRecord& b) { return a.id < b.id; });
    return std::move(result_);
  }

  // Waits until `arrival_s` after the start; false when the run stopped meanwhile.
  net::awaitable<bool> wait_for_arrival(double arrival_s) {
    if (stopping_) co_return false;
    const auto at =
        t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s));
    if (at > Clock::now()) {
      arrival_timer_.expires_at(at);
      beast::error_code ec;
      co_await arrival_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    co_return !stopping_;
  }

  void spawn(net::awaitable<void> task) {
    ++tasks_;
    net::co_spawn(ioc_, std::move(task), [this](std::exception_ptr) {
      --tasks_;
      maybe_finish();
    });
  }

  void maybe_finish() {
    if (!dispatcher_done_ || tasks_ > 0) return;
    finished_ = true;
    deadline_timer_.cancel();
    progress_timer_.cancel();
  }

  net::awaitable<void> deadline() {
    deadline_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(*options_.duration_s)));
    beast::error_code ec;
    co_await deadline_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (ec || finished_) co_return;
    stopping_ = true;
    arrival_timer_.cancel();
    if (options_.cancel_at_deadline) {
      cancelling_ = true;
      active_.close_all();
    }
  }

  ProgressState progress_state() const {
    return {completed_, result_.planned - result_.not_started, running_, errors_,
            ms_between(t0_, Clock::now()) / 1000.0};
  }

  net::awaitable<void> progress_loop() {
    while (!finished_) {
      progress_timer_.expires_after(std::chrono::milliseconds(250));
      beast::error_code ec;
      co_await progress_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
      if (!finished_) progress_.update(progress_state());
    }
  }

  StreamRequest make_request(const RequestRecord& r, const std::string& prompt,
                             const std::string& session_id) const {
    json body = {{"prompt", prompt},
                 {"max_tokens", options_.max_tokens},
                 {"temperature", options_.temperature},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    if (!options_.model.empty()) body["model"] = options_.model;
    if (options_.ignore_eos) body["ignore_eos"] = true;
    if (options_.temperature > 0) body["seed"] = options_.seed + static_cast<uint64_t>(r.id);
    if (!session_id.empty()) body["user"] = session_id;
    StreamRequest req;
    req.target = "/v1/completions";
    req.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
    req.timeout = std::chrono::milliseconds(static_cast<long long>(options_.timeout_s * 1000));
    // "default" (no --sla-mix): no header, the server's default class applies.
    if (auto sla = r.tags.find("sla"); sla != r.tags.end() && sla->second != "default") {
      req.headers.emplace_back("x-latency-sla", sla->second);
    }
    if (!session_id.empty()) req.headers.emplace_back("x-session-id", session_id);
    if (!options_.api_key.empty()) {
      req.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
    }
    return req;
  }

  // One exchange; a client-side failure (not expected: errors come back as codes) becomes the
  // request's error rather than ending the run with a slot never released.
  net::awaitable<StreamResult> attempt(const StreamRequest& req) {
    try {
      co_return co_await stream_post(endpoints_, url_, req, active_);
    } catch (const std::exception& e) {
      StreamResult failed;
      failed.error = std::string("client: ") + e.what();
      co_return failed;
    }
  }

  // Sends one request (and, on 429 with --retry-429, once more after Retry-After). Latencies
  // count from the first send: that is what the client waited.
  net::awaitable<Sent> send(RequestRecord r, const std::string& prompt,
                            const std::string& session_id) {
    Sent out;
    const StreamRequest req = make_request(r, prompt, session_id);
    const Clock::time_point first_send = Clock::now();
    r.start_ms = ms_between(t0_, first_send);
    ++running_;
    StreamResult s = co_await attempt(req);
    Clock::time_point attempt_send = first_send;
    if (s.status == 429) {
      ++r.rejected_429;
      if (options_.retry_429 && !stopping_) {
        net::steady_timer wait(co_await net::this_coro::executor);
        wait.expires_after(std::chrono::seconds(std::clamp(s.retry_after_s.value_or(1), 0, 60)));
        beast::error_code ec;
        co_await wait.async_wait(net::redirect_error(net::use_awaitable, ec));
        if (!stopping_) {
          attempt_send = Clock::now();
          s = co_await attempt(req);
          if (s.status == 429) ++r.rejected_429;
        }
      }
    }
    --running_;
    const double offset = ms_between(first_send, attempt_send);
    r.http_status = s.status;
    r.ok = s.status == 200 && s.done && s.error.empty();
    r.error = s.error;
    r.cancelled = !r.ok && cancelling_;
    r.e2e_ms = offset + s.end_ms;
    if (!s.chunk_ms.empty()) r.ttft_ms = offset + s.chunk_ms.front();
    for (size_t i = 1; i < s.chunk_ms.size(); ++i) {
      r.itl_ms.push_back(s.chunk_ms[i] - s.chunk_ms[i - 1]);
    }
    r.output_tokens_from_usage = s.completion_tokens.has_value();
    r.output_tokens = s.completion_tokens.value_or(static_cast<int>(s.chunk_ms.size()));
    r.prompt_tokens = s.prompt_tokens.value_or(r.planned_prompt_tokens);
    ++completed_;
    if (!r.ok && !r.cancelled) ++errors_;
    out.record = std::move(r);
    out.text = std::move(s.text);
    co_return out;
  }

  net::awaitable<void> request_task(const PreparedRequest& p) {
    co_await slots_.acquire();
    if (stopping_) {
      ++result_.not_started;
      slots_.release();
      co_return;
    }
    RequestRecord r;
    r.id = p.plan.id;
    r.tags = {{"sla", p.plan.sla}, {"length", p.plan.length_class}};
    r.planned_prompt_tokens = p.prompt_tokens;
    Sent sent = co_await send(std::move(r), p.prompt, "");
    result_.records.push_back(std::move(sent.record));
    slots_.release();
  }

  net::awaitable<void> session_task(const PreparedSession& s, int index) {
    co_await slots_.acquire();
    const int turns = static_cast<int>(s.user_lines.size());
    std::string conversation = s.history;
    for (int t = 0; t < turns; ++t) {
      if (t > 0 && options_.think_time_s > 0) {
        slots_.release();
        net::steady_timer think(co_await net::this_coro::executor);
        think.expires_after(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(options_.think_time_s)));
        beast::error_code ec;
        co_await think.async_wait(net::redirect_error(net::use_awaitable, ec));
        co_await slots_.acquire();
      }
      if (stopping_) {
        result_.not_started += turns - t;
        break;
      }
      conversation += session_turn_text(s.user_lines[t]);
      RequestRecord r;
      r.id = index * turns + t;
      r.tags = {{"sla", s.plan.sla}, {"turn", t == 0 ? "first" : "follow_up"}};
      r.planned_prompt_tokens = t == 0 ? s.first_prompt_tokens : 0;
      Sent sent = co_await send(std::move(r), conversation, s.plan.id);
      const bool ok = sent.record.ok;
      result_.records.push_back(std::move(sent.record));
      if (!ok) {  // the conversation cannot go on without the answer
        result_.not_started += turns - t - 1;
        break;
      }
      conversation += sent.text;
    }
    slots_.release();
  }

  const RunOptions& options_;
  HttpUrl url_;
  net::io_context ioc_;
  std::vector<tcp::endpoint> endpoints_;
  AsyncSemaphore slots_;
  net::steady_timer deadline_timer_, arrival_timer_, progress_timer_;
  Progress progress_;
  ActiveStreams active_;
  Clock::time_point t0_;
  RunResult result_;
  int tasks_ = 0, running_ = 0, completed_ = 0, errors_ = 0;
  bool dispatcher_done_ = false, finished_ = false, stopping_ = false, cancelling_ = false;
};

}  // namespace

RunResult run_requests(const RunOptions& options, const std::vector<PreparedRequest>& requests) {
  return Run(options, static_cast<int>(requests.size())).run_requests(requests);
}

RunResult run_sessions(const RunOptions& options, const std::vector<PreparedSession>& sessions) {
  int planned = 0;
  for (const PreparedSession& s : sessions) planned += static_cast<int>(s.user_lines.size());
  return Run(options, planned).run_sessions(sessions);
}

}  // namespace k25::loadgen
