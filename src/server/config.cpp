#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/bits.h"
#include "core/error.h"
#include "core/text_file.h"
#include "k25.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/jinja_error.h"

namespace k25 {

namespace {

// A value the engine reads itself (include/k25.h settings) is checked the way k25_load will
// check it, so a bad one stops the start before the model loads.
void check_engine_setting(const std::string& key, const std::string& value) {
  char* error = nullptr;
  if (k25_check_setting((key + "=" + value).c_str(), &error) == 0) return;
  std::string message = error ? error : "invalid";
  k25_free_string(error);
  const std::string prefix = "setting ";
  if (message.starts_with(prefix)) message.erase(0, prefix.size());
  fail("config: ", message);
}

int64_t parse_int(const std::string& key, const std::string& v, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) {
    fail("config: ", key, ": expected an integer, got '", v, "'");
  }
  if (n < min || n > max) fail("config: ", key, ": ", n, " is outside [", min, ", ", max, "]");
  return n;
}

double parse_double(const std::string& key, const std::string& v, double min, double max) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) {
    fail("config: ", key, ": expected a number, got '", v, "'");
  }
  if (x < min || x > max) fail("config: ", key, ": ", x, " is outside [", min, ", ", max, "]");
  return x;
}

bool parse_bool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  fail("config: ", key, ": expected true or false, got '", v, "'");
}

std::string parse_choice(const std::string& key, const std::string& v,
                         const std::vector<std::string>& choices) {
  for (const std::string& c : choices) {
    if (v == c) return v;
  }
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail("config: ", key, ": expected one of ", list, ", got '", v, "'");
}

// Builders for the table below.
ConfigKey int_key(std::string path, std::string flag, std::string help, int ServerConfig::*member,
                  int64_t min, int64_t max) {
  return {path, flag, help, [path, member, min, max](ServerConfig& c, const std::string& v) {
            c.*member = static_cast<int>(parse_int(path, v, min, max));
          }};
}
ConfigKey double_key(std::string path, std::string flag, std::string help,
                     double ServerConfig::*member, double min, double max) {
  return {path, flag, help, [path, member, min, max](ServerConfig& c, const std::string& v) {
            c.*member = parse_double(path, v, min, max);
          }};
}
ConfigKey bool_key(std::string path, std::string flag, std::string help,
                   bool ServerConfig::*member) {
  return {path, flag, help, [path, member](ServerConfig& c, const std::string& v) {
            c.*member = parse_bool(path, v);
          }};
}
ConfigKey string_key(std::string path, std::string flag, std::string help,
                     std::string ServerConfig::*member) {
  return {path, flag, help, [member](ServerConfig& c, const std::string& v) { c.*member = v; }};
}
ConfigKey choice_key(std::string path, std::string flag, std::string help,
                     std::string ServerConfig::*member, std::vector<std::string> choices) {
  return {path, flag, help, [path, member, choices](ServerConfig& c, const std::string& v) {
            c.*member = parse_choice(path, v, choices);
          }};
}

std::vector<ConfigKey> make_keys() {
  using C = ServerConfig;
  std::vector<ConfigKey> k;
  k.push_back(
      string_key("model.path", "--model", "GGUF file or Hugging Face directory", &C::model_path));
  k.push_back(string_key("model.chat_template", "--chat-template",
                         "Jinja chat template file that replaces the model's own",
                         &C::chat_template_file));
  k.push_back(int_key("model.tensor_parallel_size", "--tensor-parallel-size",
                      "tensor-parallel ranks (one process uses 1)", &C::tensor_parallel_size, 1,
                      1024));
  k.push_back(int_key("model.pipeline_parallel_size", "--pipeline-parallel-size",
                      "pipeline-parallel stages (one process uses 1)", &C::pipeline_parallel_size,
                      1, 1024));
  k.push_back(int_key("flash_scheduler.l1_cache_size", "--l1-cache-size",
                      "L1 KV ring, most recent tokens per sequence (0: off)", &C::l1_cache_size, 0,
                      1 << 20));
  k.push_back(choice_key("flash_scheduler.l1_eviction_policy", "--l1-eviction-policy",
                         "L1 eviction: lru or fifo", &C::l1_eviction_policy, {"lru", "fifo"}));
  k.push_back(bool_key("flash_scheduler.l3_enabled", "--l3-enabled", "use the disk KV tier",
                       &C::l3_enabled));
  k.push_back(string_key("flash_scheduler.l3_device", "--l3-device",
                         "file or block device of the disk KV tier", &C::l3_device));
  k.push_back({"flash_scheduler.l3_page_size", "--l3-page-size", "disk KV page bytes (4096)",
               [](C& c, const std::string& v) {
                 int64_t n = parse_int("flash_scheduler.l3_page_size", v, 512, 1 << 24);
                 if (!is_power_of_two(n)) {
                   fail("config: flash_scheduler.l3_page_size: ", n, " is not a power of 2");
                 }
                 c.l3_page_size = static_cast<int>(n);
               }});
  k.push_back(double_key("flash_scheduler.l3_cache_size_gb", "--l3-cache-size-gb",
                         "disk budget of the L3 KV tier (GiB)", &C::l3_cache_size_gb, 0.001,
                         1 << 20));
  k.push_back(double_key("flash_scheduler.l3_idle_seconds", "--l3-idle-seconds",
                         "move cached KV unused this long to L3 (0: only under memory pressure)",
                         &C::l3_idle_seconds, 0, 1e9));
  k.push_back(bool_key("flash_scheduler.prefix_cache", "--prefix-cache",
                       "reuse the KV of equal prompt prefixes (sessions)", &C::prefix_cache));
  k.push_back(choice_key("flash_scheduler.l3_prefetcher", "--l3-prefetcher",
                         "read hot sessions' KV back from L3 ahead of their next turn (lru-k) "
                         "or not (none)",
                         &C::l3_prefetcher, {"lru-k", "none"}));
  k.push_back(choice_key("flash_scheduler.l3_backend", "--l3-backend",
                         "L3 KV tier: disk, redis (shared by replicas) or disk+redis",
                         &C::l3_backend, {"disk", "redis", "disk+redis"}));
  k.push_back({"flash_scheduler.redis_url", "--redis-url",
               "shared KV tier: redis://[user@]host:port[/db][,host:port...]",
               [](C& c, const std::string& v) {
                 check_engine_setting("flash_scheduler.redis_url", v);
                 c.redis_url = v;
               }});
  k.push_back(string_key("flash_scheduler.redis_password_file", "--redis-password-file",
                         "file whose first line is the Redis password", &C::redis_password_file));
  k.push_back(int_key("flash_scheduler.redis_connect_timeout_ms", "--redis-connect-timeout-ms",
                      "Redis connect timeout", &C::redis_connect_timeout_ms, 1, 60000));
  k.push_back(int_key("flash_scheduler.redis_timeout_ms", "--redis-timeout-ms",
                      "Redis command timeout (per socket wait)", &C::redis_timeout_ms, 1, 60000));
  k.push_back(int_key("flash_scheduler.redis_read_timeout_ms", "--redis-read-timeout-ms",
                      "longest a prompt waits for the shared KV tier", &C::redis_read_timeout_ms, 1,
                      60000));
  k.push_back(int_key("flash_scheduler.redis_ttl_seconds", "--redis-ttl-seconds",
                      "TTL of shared KV pages", &C::redis_ttl_seconds, 1, 365 * 86400));
  k.push_back(int_key("flash_scheduler.max_batch_size", "--max-batch-size", "concurrent sequences",
                      &C::max_batch_size, 1, 4096));
  k.push_back(int_key("flash_scheduler.batch_timeout_ms", "--batch-timeout-ms",
                      "how long a micro-task waits to be batched", &C::batch_timeout_ms, 0,
                      60'000));
  k.push_back(string_key("model.flash_metadata", "--flash-metadata",
                         "k25_metadata directory (default: <model.path>/k25_metadata)",
                         &C::flash_metadata));
  k.push_back(bool_key("flash_scheduler.pruning", "--pruning",
                       "gated pruning (false: every request runs the full model)", &C::pruning));
  k.push_back(bool_key("flash_scheduler.adaptive_pruning", "--adaptive-pruning",
                       "Level 3 adaptive pruning during decode", &C::adaptive_pruning));
  k.push_back(
      choice_key("flash_scheduler.speculative", "--speculative",
                 "speculative decoding of requests without the field: off, ngram, self, auto",
                 &C::speculative, {"off", "ngram", "self", "auto"}));
  k.push_back(int_key("flash_scheduler.speculative_max_batch", "--speculative-max-batch",
                      "steps with more decoding sequences do not speculate",
                      &C::speculative_max_batch, 0, 4096));
  k.push_back(choice_key("flash_scheduler.rule_pruning", "--rule-pruning",
                         "Level 1 rule: auto (on with calibrated metadata), on, off",
                         &C::rule_pruning, {"auto", "on", "off"}));
  k.push_back(int_key("flash_scheduler.rule_max_prompt_tokens", "--rule-max-prompt-tokens",
                      "Level 1 applies below this prompt length", &C::rule_max_prompt_tokens, 0,
                      100'000'000));
  k.push_back(int_key("flash_scheduler.rule_max_response_tokens", "--rule-max-response-tokens",
                      "Level 1 applies below this response length", &C::rule_max_response_tokens, 0,
                      100'000'000));
  k.push_back(double_key("flash_scheduler.rule_ffn_skip_fraction", "--rule-ffn-skip-fraction",
                         "Level 1: share of the last blocks whose FFN is skipped",
                         &C::rule_ffn_skip_fraction, 0.0, 0.9));
  k.push_back(int_key("flash_scheduler.simhash_max_distance", "--simhash-max-distance",
                      "largest Hamming distance of a domain signature match",
                      &C::simhash_max_distance, 0, 64));
  k.push_back(int_key("flash_scheduler.l2_cache_size_mb", "--l2-cache-size-mb",
                      "L2 KV pool budget in MiB (0: max_batch_size sequences of full context)",
                      &C::l2_cache_size_mb, 0, 1 << 24));
  k.push_back({"flash_scheduler.l2_page_tokens", "--l2-page-tokens", "positions per KV page",
               [](C& c, const std::string& v) {
                 int64_t n = parse_int("flash_scheduler.l2_page_tokens", v, 1, 4096);
                 if (!is_power_of_two(n)) {
                   fail("config: flash_scheduler.l2_page_tokens: ", n, " is not a power of 2");
                 }
                 c.l2_page_tokens = static_cast<int>(n);
               }});
  k.push_back({"flash_scheduler.kv_cache_dtype", "--kv-cache-dtype",
               "element type of the stored K and V rows: f32 or f16 (half the bytes per token)",
               [](C& c, const std::string& v) {
                 check_engine_setting("flash_scheduler.kv_cache_dtype", v);
                 c.kv_cache_dtype = v;
               }});
  k.push_back(int_key("flash_scheduler.micro_task_tokens", "--micro-task-tokens",
                      "prefill micro-task size in tokens", &C::micro_task_tokens, 1, 1 << 20));
  k.push_back(double_key("flash_scheduler.aging_per_second", "--aging-per-second",
                         "priority points a request gains per second without service",
                         &C::aging_per_second, 0, 1e6));
  k.push_back(int_key("engine.threads", "--threads", "compute threads (0: all cores)", &C::threads,
                      0, 1024));
  k.push_back(int_key("engine.context_size", "--ctx-size",
                      "context per sequence in tokens (0: the model's)", &C::context_size, 0,
                      1 << 24));
  k.push_back(int_key("engine.step_token_budget", "--step-token-budget", "tokens per forward call",
                      &C::step_token_budget, 1, 1 << 20));
  k.push_back(double_key("engine.step_position_cost", "--step-position-cost",
                         "budget share of a token per position of context (-1: from the model)",
                         &C::step_position_cost, -1, 1));
  k.push_back(double_key("engine.target_step_ms", "--target-step-ms",
                         "longest a step should take: where a step of step_token_budget takes "
                         "longer, the budget and position cost are measured to fit this (0: use "
                         "them as given)",
                         &C::target_step_ms, 0, 60'000));
  k.push_back(int_key("engine.max_queue", "--max-queue", "waiting requests before 429",
                      &C::max_queue, 0, 1 << 20));
  k.push_back(int_key("engine.queue_timeout_s", "--queue-timeout-s",
                      "a request not started after this long fails with 503 (0: no limit)",
                      &C::queue_timeout_s, 0, 86'400));
  k.push_back(int_key("engine.debug_step_delay_ms", "--debug-step-delay-ms",
                      "testing aid: sleep this long before every forward call (0: off)",
                      &C::debug_step_delay_ms, 0, 600'000));
  k.push_back({"engine.debug_fault", "--debug-fault",
               "testing aid: throw inside a step, <runtime_error|bad_alloc>:step=<n> or "
               "...:request=<id>:tokens=<n> (empty: off)",
               [](C& c, const std::string& v) {
                 check_engine_setting("engine.debug_fault", v);  // a bad spec stops the start
                 c.debug_fault = v;
               }});
  k.push_back(double_key("sampling.temperature", "--temperature", "default temperature (0: greedy)",
                         &C::temperature, 0, 10));
  k.push_back(double_key("sampling.top_p", "--top-p", "default top_p", &C::top_p, 0, 1));
  k.push_back(
      int_key("sampling.top_k", "--top-k", "default top_k (0: off)", &C::top_k, 0, 1 << 20));
  k.push_back(double_key("sampling.min_p", "--min-p", "default min_p (0: off)", &C::min_p, 0, 1));
  k.push_back(double_key("sampling.repeat_penalty", "--repeat-penalty",
                         "default repetition penalty (1: off)", &C::repeat_penalty, 0.01, 10));
  k.push_back(int_key("sampling.max_tokens", "--max-tokens",
                      "default max_tokens (0: the rest of the context)", &C::max_tokens, 0,
                      1 << 24));
  k.push_back(string_key("api_server.host", "--host", "listen address", &C::host));
  k.push_back(
      int_key("api_server.port", "--port", "listen port (0: any free port)", &C::port, 0, 65535));
  k.push_back(bool_key("api_server.enable_header_passthrough", "--enable-header-passthrough",
                       "read the x-* fingerprint headers", &C::enable_header_passthrough));
  k.push_back(string_key("api_server.api_key_file", "--api-key-file",
                         "file holding the Bearer key (empty: no auth)", &C::api_key_file));
  k.push_back({"api_server.max_body_bytes", "--max-body-bytes", "largest request body (413 above)",
               [](C& c, const std::string& v) {
                 c.max_body_bytes = parse_int("api_server.max_body_bytes", v, 1, int64_t{1} << 32);
               }});
  k.push_back(int_key("api_server.read_timeout_s", "--read-timeout-s",
                      "seconds to receive a whole request", &C::read_timeout_s, 1, 86'400));
  k.push_back(int_key("api_server.write_timeout_s", "--write-timeout-s",
                      "seconds a client may take to accept one write", &C::write_timeout_s, 1,
                      86'400));
  k.push_back(int_key("api_server.idle_timeout_s", "--idle-timeout-s",
                      "keep-alive connections idle this long are closed", &C::idle_timeout_s, 1,
                      86'400));
  k.push_back(int_key("api_server.io_threads", "--io-threads", "HTTP event-loop threads",
                      &C::io_threads, 1, 64));
  k.push_back(int_key("api_server.max_connections", "--max-connections",
                      "open connections at most; more get 503 (0: the file-descriptor limit less "
                      "a reserve)",
                      &C::max_connections, 0, 1 << 24));
  k.push_back({"api_server.stream_buffer_bytes", "--stream-buffer-bytes",
               "events a streaming client has not read, per connection, before its request is "
               "cancelled",
               [](C& c, const std::string& v) {
                 c.stream_buffer_bytes =
                     parse_int("api_server.stream_buffer_bytes", v, 4096, int64_t{1} << 32);
               }});
  k.push_back(int_key("api_server.shutdown_timeout_s", "--shutdown-timeout-s",
                      "on SIGTERM, seconds in-flight requests get to finish",
                      &C::shutdown_timeout_s, 0, 86'400));
  k.push_back(int_key("api_server.retry_after_s", "--retry-after-s",
                      "Retry-After seconds on 429/503", &C::retry_after_s, 1, 3600));
  k.push_back(bool_key("api_server.log_requests", "--log-requests",
                       "one log line per request on stderr", &C::log_requests));
  k.push_back(choice_key("api_server.log_format", "--log-format",
                         "request log lines: json (one object per line) or text", &C::log_format,
                         {"json", "text"}));
  k.push_back(string_key("warmup.file", "--warmup-file",
                         "warm-up prompts, one {\"domain\",\"prompt\"} JSON object per line",
                         &C::warmup_file));
  k.push_back(int_key("warmup.max_tokens", "--warmup-max-tokens",
                      "tokens generated per warm-up prompt", &C::warmup_max_tokens, 1, 4096));
  k.push_back({"fallback.url", "--fallback-url",
               "OpenAI-compatible upstream (http://host:port[/v1]) taking requests while the "
               "circuit is open (empty: no fallback)",
               [](C& c, const std::string& v) {
                 if (!v.empty() && v.rfind("http://", 0) != 0) {
                   fail("config: fallback.url: '", v, "' must start with http://");
                 }
                 c.fallback_url = v;
               }});
  k.push_back(int_key("fallback.timeout_ms", "--fallback-timeout-ms",
                      "a request whose first token is due counts as a timeout after this long "
                      "without the engine computing any of it",
                      &C::fallback_timeout_ms, 1, 86'400'000));
  k.push_back(int_key("fallback.failure_threshold", "--fallback-failure-threshold",
                      "consecutive engine failures (timeouts, errors) that open the circuit",
                      &C::fallback_failure_threshold, 1, 1'000'000));
  k.push_back(int_key("fallback.probe_interval_s", "--fallback-probe-interval-s",
                      "seconds the circuit stays open before one request probes the engine",
                      &C::fallback_probe_interval_s, 0, 86'400));
  return k;
}

// A warm-up list: each item a mapping {domain (optional, "default"), prompt}.
void add_warmup_prompts(ServerConfig& config, const YAML::Node& list,
                        const std::string& source_name) {
  if (list.IsNull()) return;
  if (!list.IsSequence()) {
    fail(source_name, ": config: warmup.prompts: expected a list of {domain, prompt}");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& item = list[i];
    if (!item.IsMap()) fail(source_name, ": config: warmup.prompts[", i, "]: expected a mapping");
    WarmupPrompt p;
    for (const auto& field : item) {
      const std::string name = field.first.as<std::string>();
      if (!field.second.IsScalar()) {
        fail(source_name, ": config: warmup.prompts[", i, "].", name, ": expected a string");
      }
      if (name == "domain") {
        p.domain = field.second.as<std::string>();
      } else if (name == "prompt") {
        p.prompt = field.second.as<std::string>();
      } else {
        fail(source_name, ": config: warmup.prompts[", i, "]: unknown key '", name, "'");
      }
    }
    if (p.prompt.empty()) fail(source_name, ": config: warmup.prompts[", i, "]: empty prompt");
    config.warmup.push_back(std::move(p));
  }
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

const std::vector<RemovedConfigKey>& removed_config_keys() {
  static const std::vector<RemovedConfigKey> keys = {
      {"flash_scheduler.l2_cache_shards", "--l2-cache-shards",
       "pages were tagged with a position shard that nothing read"},
      {"flash_scheduler.l2_prefetch_distance", "--l2-prefetch-distance",
       "an L3 restore reads a prompt's whole page chain at admission, so nothing is left ahead to "
       "prefetch"},
  };
  return keys;
}

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

void set_config_value(ServerConfig& config, const std::string& path, const std::string& value) {
  for (const ConfigKey& key : config_keys()) {
    if (key.path == path) {
      key.apply(config, value);
      return;
    }
  }
  for (const RemovedConfigKey& key : removed_config_keys()) {
    if (key.path == path) {
      fail("config: ", path, " was removed: it had no effect (", key.reason,
           "); delete it (docs/server.md)");
    }
  }
  fail("config: unknown key '", path, "'");
}

void apply_config_yaml(ServerConfig& config, const std::string& yaml_text,
                       const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    fail(source_name, ": invalid YAML: ", e.what());
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) fail(source_name, ": the top level must be a mapping of sections");
  for (const auto& section : root) {
    const std::string section_name = section.first.as<std::string>();
    if (section.second.IsNull()) continue;
    // `warmup:` may also be the list of prompts itself.
    if (section_name == "warmup" && section.second.IsSequence()) {
      add_warmup_prompts(config, section.second, source_name);
      continue;
    }
    if (!section.second.IsMap())
      fail(source_name, ": section '", section_name, "' must be a mapping");
    for (const auto& entry : section.second) {
      const std::string path = section_name + "." + entry.first.as<std::string>();
      if (path == "warmup.prompts") {
        add_warmup_prompts(config, entry.second, source_name);
        continue;
      }
      if (!entry.second.IsScalar() && !entry.second.IsNull()) {
        fail(source_name, ": config: ", path, ": expected a single value");
      }
      const std::string value = entry.second.IsNull() ? "" : entry.second.as<std::string>();
      try {
        set_config_value(config, path, value);
      } catch (const Error& e) {
        fail(source_name, ": ", e.what());
      }
    }
  }
}

void apply_config_file(ServerConfig& config, const std::string& yaml_path) {
  apply_config_yaml(config, read_text_file(yaml_path, "--config"), yaml_path);
}

void load_api_key(ServerConfig& config) {
  if (config.api_key_file.empty()) return;
  config.api_key = trim(read_text_file(config.api_key_file, "config: api_server.api_key_file"));
  if (config.api_key.empty()) {
    fail("config: api_server.api_key_file: '", config.api_key_file, "' holds no key");
  }
}

void load_redis_password(ServerConfig& config) {
  if (config.redis_password_file.empty()) return;
  std::ifstream in(config.redis_password_file);
  if (!in) {
    fail("config: flash_scheduler.redis_password_file: cannot open '", config.redis_password_file,
         "'");
  }
  std::string line;
  std::getline(in, line);
  config.redis_password = trim(line);
  if (config.redis_password.empty()) {
    fail("config: flash_scheduler.redis_password_file: '", config.redis_password_file,
         "' holds no password");
  }
}

void load_chat_template(ServerConfig& config) {
  if (config.chat_template_file.empty()) return;
  const std::string where =
      concat("config: model.chat_template: '", config.chat_template_file, "'");
  std::ifstream in(config.chat_template_file, std::ios::binary);
  if (!in) fail(where, ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) fail(where, " is empty");
  try {
    ChatPromptTemplate check(text.str(), "", "");  // parsed only to report its errors now
  } catch (const jinja::TemplateError& e) {
    fail(where, " does not parse: ", e.what());
  }
  config.chat_template = text.str();
}

void load_warmup_file(ServerConfig& config) {
  if (config.warmup_file.empty()) return;
  std::ifstream in(config.warmup_file);
  if (!in) fail("config: warmup.file: cannot open '", config.warmup_file, "'");
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (trim(line).empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const auto where = [&] { return concat(config.warmup_file, ":", line_no); };
    if (!j.is_object()) fail(where(), ": expected a JSON object {\"domain\", \"prompt\"}");
    WarmupPrompt p;
    for (const auto& [key, value] : j.items()) {
      if ((key != "domain" && key != "prompt") || !value.is_string()) {
        fail(where(), ": '", key, "' is not a string field domain or prompt");
      }
      (key == "domain" ? p.domain : p.prompt) = value.get<std::string>();
    }
    if (p.prompt.empty()) fail(where(), ": no prompt");
    config.warmup.push_back(std::move(p));
  }
}

}  // namespace k25
