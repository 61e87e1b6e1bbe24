// k25-server: loads a model in the background and runs the warm-up prompts (GET /health says 503
// until then), serves the HTTP API, and on SIGTERM/SIGINT drains: stops accepting, lets in-flight
// requests finish within api_server.shutdown_timeout_s, cancels the rest, exits 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "kernels/kernel_table.h"
#include "kv/redis_url.h"
#include "kv/shared_kv_namespace.h"
#include "server/api.h"
#include "server/command_line.h"
#include "server/http_server.h"
#include "server/warmup.h"

namespace {

using Clock = std::chrono::steady_clock;

void log_event(const std::string& json_fields) {
  std::cerr << "{\"event\":" + json_fields + "}\n";
}

// Many keep-alive clients need many descriptors; take what the hard limit allows.
void raise_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// api_server.max_connections 0: the file-descriptor limit less a reserve for the model, the
// logs, the disk tier and upstream connections, so that accept() is not what runs out.
int connection_cap(int configured) {
  if (configured > 0) return configured;
  rlimit limit{};
  rlim_t n = 1 << 20;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    n = std::min(n, limit.rlim_cur);
  }
  const rlim_t reserve = std::min<rlim_t>(64, n / 2);
  return static_cast<int>(std::max<rlim_t>(1, n - reserve));
}

template <class Done>
bool wait_until(Done done, Clock::time_point deadline) {
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Names the model for the L3 tier's content tag: its canonical path, size and modification time
// (a replaced model file gets a new tag, so its predecessor's KV on disk is never reused).
uint64_t model_file_tag(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  uint64_t tag = std::hash<std::string>{}(ec ? path : canonical.string());
  const auto size = fs::is_regular_file(canonical, ec) ? fs::file_size(canonical, ec) : 0;
  const auto modified = fs::last_write_time(canonical, ec).time_since_epoch().count();
  for (uint64_t v : {static_cast<uint64_t>(size), static_cast<uint64_t>(modified)}) {
    tag = (tag ^ v) * 0x100000001b3ull;
  }
  return tag;
}

// flash_scheduler.l3_backend redis / disk+redis: where the shared KV tier is and what it is
// keyed by (kv/shared_kv_namespace.h: the model file's content, not its path).
void configure_shared_tier(const k25::ServerConfig& config, k25::EngineOptions& options) {
  using Backend = k25::EngineOptions::L3Backend;
  if (config.l3_backend == "disk") return;
  if (config.redis_url.empty()) {
    k25::fail("config: flash_scheduler.l3_backend ", config.l3_backend,
              " needs flash_scheduler.redis_url");
  }
  options.l3_backend = config.l3_backend == "redis" ? Backend::kRedis : Backend::kDiskAndRedis;
  if (options.l3_backend == Backend::kDiskAndRedis && options.l3_path.empty()) {
    k25::fail(
        "config: flash_scheduler.l3_backend disk+redis needs flash_scheduler.l3_enabled and "
        "l3_device");
  }
  k25::RedisStoreOptions& store = options.redis.store;
  store.address = k25::parse_redis_url(config.redis_url);
  store.credentials = {store.address.user, config.redis_password};
  store.connect_timeout = std::chrono::milliseconds(config.redis_connect_timeout_ms);
  store.command_timeout = std::chrono::milliseconds(config.redis_timeout_ms);
  store.ttl_seconds = config.redis_ttl_seconds;
  options.redis.read_timeout = std::chrono::milliseconds(config.redis_read_timeout_ms);
  options.shared_weights_hash = k25::weights_content_hash(config.model_path);
  options.l3_idle_seconds = config.l3_idle_seconds;
}

int run(const k25::ServerConfig& config) {
  if (config.model_path.empty()) {
    k25::fail("no model: set model.path in the config file or pass --model PATH");
  }
  const char* isa = k25::kernels().isa;  // first: a K25_ISA the CPU cannot run is an error
  raise_file_limit();
  // Signals are taken by sigwait() in this thread only; every thread started below inherits
  // the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);  // sent by the loader when the model cannot be loaded
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  k25::Api api(config);
  k25::HttpServerOptions http;
  http.host = config.host;
  http.port = config.port;
  http.max_body_bytes = config.max_body_bytes;
  http.read_timeout = std::chrono::seconds(config.read_timeout_s);
  http.idle_timeout = std::chrono::seconds(config.idle_timeout_s);
  http.write_timeout = std::chrono::seconds(config.write_timeout_s);
  http.io_threads = config.io_threads;
  http.max_connections = connection_cap(config.max_connections);
  http.retry_after_s = config.retry_after_s;
  k25::HttpServer server(
      http, [&api](k25::HttpExchange& ex) { return api.handle(ex); },
      [&api](int status, const std::string& message) { return api.error_text(status, message); });
  server.start();
  log_event(k25::concat("\"listening\",\"host\":\"", config.host, "\",\"port\":", server.port(),
                        ",\"max_connections\":", http.max_connections, ",\"isa\":\"", isa, "\""));

  std::unique_ptr<k25::Model> model;
  std::unique_ptr<k25::Engine> engine;
  std::string load_error;
  std::thread loader([&] {
    try {
      auto start = Clock::now();
      model = k25::Model::load(config.model_path);
      k25::EngineOptions options;
      options.n_threads = config.threads;
      options.max_batch_size = config.max_batch_size;
      options.max_queue = config.max_queue;
      options.context_size = config.context_size;
      options.step_token_budget = config.step_token_budget;
      options.position_cost = config.step_position_cost;
      options.target_step_ms = config.target_step_ms;
      options.micro_task_tokens = config.micro_task_tokens;
      options.aging_per_second = config.aging_per_second;
      options.kv_budget_bytes = static_cast<size_t>(config.l2_cache_size_mb) << 20;
      options.kv_page_tokens = config.l2_page_tokens;
      options.kv_dtype = config.kv_cache_dtype;
      options.batch_timeout_ms = config.batch_timeout_ms;
      options.queue_timeout_ms = config.queue_timeout_s * 1000;
      options.debug_step_delay_ms = config.debug_step_delay_ms;
      options.debug_fault = config.debug_fault;
      options.prefix_cache = config.prefix_cache;
      options.l1_window = config.l1_cache_size;
      options.speculation.max_batch = config.speculative_max_batch;
      if (config.l3_enabled) {
        if (config.l3_device.empty())
          k25::fail("config: l3_enabled needs flash_scheduler.l3_device");
        options.l3_path = config.l3_device;
        options.l3_page_size = static_cast<uint32_t>(config.l3_page_size);
        options.l3_capacity_bytes = static_cast<uint64_t>(config.l3_cache_size_gb * (1 << 30));
        options.l3_content_tag = model_file_tag(config.model_path);
        options.l3_idle_seconds = config.l3_idle_seconds;
      }
      options.l3_session_prefetch = config.l3_prefetcher == "lru-k";
      configure_shared_tier(config, options);
      engine = std::make_unique<k25::Engine>(*model, options);
      if (!config.warmup.empty()) {
        api.set_warming_up();
        log_event(k25::concat("\"warmup_start\",\"prompts\":", config.warmup.size()));
        k25::WarmupReport report =
            k25::run_warmup(*engine, config.warmup, config.warmup_max_tokens);
        api.set_warmup_report(report);
        log_event(k25::concat("\"warmup_done\",\"prompts\":", report.requests,
                              ",\"prompt_tokens\":", report.prompt_tokens,
                              ",\"completion_tokens\":", report.completion_tokens,
                              ",\"warmup_ms\":", report.seconds * 1000));
      }
      api.set_engine(engine.get());
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      log_event(k25::concat("\"ready\",\"model\":\"", config.model_path, "\",\"load_ms\":", ms,
                            ",\"context_size\":", engine->context_size()));
    } catch (const std::exception& e) {
      load_error = e.what();
      kill(getpid(), SIGUSR1);
    }
  });

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  if (signal_number == SIGUSR1) {
    loader.join();
    server.stop();
    std::cerr << "error: " << load_error << "\n";
    return 1;
  }
  log_event(k25::concat("\"draining\",\"signal\":", signal_number,
                        ",\"shutdown_timeout_s\":", config.shutdown_timeout_s));
  api.set_draining();
  server.stop_accepting();
  loader.join();  // a model still loading finishes loading; nothing is served from it
  const auto deadline = Clock::now() + std::chrono::seconds(config.shutdown_timeout_s);
  bool finished = wait_until(
      [&] { return (!engine || engine->n_active() == 0) && server.n_in_flight() == 0; }, deadline);
  if (!finished && engine) {
    log_event(k25::concat("\"cancelling\",\"requests\":", engine->n_active()));
    engine->cancel_all();
    // Cancelled streams still send their last chunk; give them a moment.
    wait_until([&] { return server.n_in_flight() == 0; }, Clock::now() + std::chrono::seconds(5));
  }
  server.stop();
  if (engine) engine->shutdown();
  log_event("\"stopped\"");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    k25::CommandLine command_line = k25::parse_server_command_line(argc, argv);
    if (command_line.exit_code) {
      (*command_line.exit_code == 0 ? std::cout : std::cerr) << command_line.output;
      return *command_line.exit_code;
    }
    return run(command_line.config);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
