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
#include "k25.h"
#include "server/api.h"
#include "server/command_line.h"
#include "server/engine_config.h"
#include "server/http_server.h"
#include "server/warmup.h"
#include "tokenizer/model_tokenizer.h"

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

int run(const k25::ServerConfig& config) {
  if (config.model_path.empty()) {
    k25::fail("no model: set model.path in the config file or pass --model PATH");
  }
  char* isa_error = nullptr;
  const char* isa = k25_kernel_isa(&isa_error);  // first: a K25_ISA the CPU cannot run is an error
  if (!isa) {
    const std::string message = isa_error;
    k25_free_string(isa_error);
    k25::fail(message);
  }
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

  // The engine, reached through the C API only (R-API6), and the model's tokenizer for the front
  // end; both outlive the API that serves them.
  k25_engine* engine = nullptr;
  std::unique_ptr<k25::Tokenizer> tokenizer;
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

  std::string load_error;
  std::thread loader([&] {
    try {
      auto start = Clock::now();
      const std::vector<std::string> settings = k25::engine_settings(config);
      std::vector<const char*> setting_ptrs;
      for (const std::string& setting : settings) setting_ptrs.push_back(setting.c_str());
      k25_engine_options options;
      k25_engine_options_init(&options);
      options.settings = setting_ptrs.data();
      options.n_settings = setting_ptrs.size();
      char* error = nullptr;
      engine = k25_load(config.model_path.c_str(), &options, &error);
      if (!engine) {
        const std::string message = error;
        k25_free_string(error);
        k25::fail(message);
      }
      tokenizer = k25::load_model_tokenizer(config.model_path);
      if (!config.warmup.empty()) {
        api.set_warming_up();
        log_event(k25::concat("\"warmup_start\",\"prompts\":", config.warmup.size()));
        k25::EngineClient client(engine, *tokenizer);
        k25::WarmupReport report = k25::run_warmup(client, config.warmup, config.warmup_max_tokens);
        api.set_warmup_report(report);
        log_event(k25::concat("\"warmup_done\",\"prompts\":", report.requests,
                              ",\"prompt_tokens\":", report.prompt_tokens,
                              ",\"completion_tokens\":", report.completion_tokens,
                              ",\"warmup_ms\":", report.seconds * 1000));
      }
      api.set_engine(engine, *tokenizer);
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      log_event(k25::concat("\"ready\",\"model\":\"", config.model_path, "\",\"load_ms\":", ms,
                            ",\"context_size\":", k25_context_size(engine)));
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
    k25_free(engine);
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
      [&] { return (!engine || k25_n_active(engine) == 0) && server.n_in_flight() == 0; },
      deadline);
  if (!finished && engine) {
    log_event(k25::concat("\"cancelling\",\"requests\":", k25_n_active(engine)));
    k25_cancel_all(engine);
    // Cancelled streams still send their last chunk; give them a moment.
    wait_until([&] { return server.n_in_flight() == 0; }, Clock::now() + std::chrono::seconds(5));
  }
  server.stop();
  k25_free(engine);
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
