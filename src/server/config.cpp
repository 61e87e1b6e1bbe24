#include "server/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace k25 {

namespace {

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

bool is_power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
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
  k.push_back(int_key("model.tensor_parallel_size", "--tensor-parallel-size",
                      "tensor-parallel ranks (one process uses 1)", &C::tensor_parallel_size, 1,
                      1024));
  k.push_back(int_key("model.pipeline_parallel_size", "--pipeline-parallel-size",
                      "pipeline-parallel stages (one process uses 1)", &C::pipeline_parallel_size,
                      1, 1024));
  k.push_back(int_key("flash_scheduler.l1_cache_size", "--l1-cache-size",
                      "L1 KV window, most recent tokens per sequence", &C::l1_cache_size, 1,
                      1 << 20));
  k.push_back(choice_key("flash_scheduler.l1_eviction_policy", "--l1-eviction-policy",
                         "L1 eviction: lru or fifo", &C::l1_eviction_policy, {"lru", "fifo"}));
  k.push_back({"flash_scheduler.l2_cache_shards", "--l2-cache-shards", "L2 KV shards (power of 2)",
               [](C& c, const std::string& v) {
                 int64_t n = parse_int("flash_scheduler.l2_cache_shards", v, 1, 1024);
                 if (!is_power_of_two(n)) {
                   fail("config: flash_scheduler.l2_cache_shards: ", n, " is not a power of 2");
                 }
                 c.l2_cache_shards = static_cast<int>(n);
               }});
  k.push_back(int_key("flash_scheduler.l2_prefetch_distance", "--l2-prefetch-distance",
                      "L2 prefetch distance (pages)", &C::l2_prefetch_distance, 0, 1024));
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
  k.push_back(choice_key("flash_scheduler.l3_prefetcher", "--l3-prefetcher",
                         "disk KV prefetcher (lru-k)", &C::l3_prefetcher, {"lru-k"}));
  k.push_back(int_key("flash_scheduler.max_batch_size", "--max-batch-size", "concurrent sequences",
                      &C::max_batch_size, 1, 4096));
  k.push_back(int_key("flash_scheduler.batch_timeout_ms", "--batch-timeout-ms",
                      "how long a micro-task waits to be batched", &C::batch_timeout_ms, 0,
                      60'000));
  k.push_back(int_key("engine.threads", "--threads", "compute threads (0: all cores)", &C::threads,
                      0, 1024));
  k.push_back(int_key("engine.context_size", "--ctx-size",
                      "context per sequence in tokens (0: the model's)", &C::context_size, 0,
                      1 << 24));
  k.push_back(int_key("engine.step_token_budget", "--step-token-budget", "tokens per forward call",
                      &C::step_token_budget, 1, 1 << 20));
  k.push_back(int_key("engine.max_queue", "--max-queue", "waiting requests before 429",
                      &C::max_queue, 0, 1 << 20));
  k.push_back(double_key("sampling.temperature", "--temperature", "default temperature (0: greedy)",
                         &C::temperature, 0, 10));
  k.push_back(double_key("sampling.top_p", "--top-p", "default top_p", &C::top_p, 0, 1));
  k.push_back(
      int_key("sampling.top_k", "--top-k", "default top_k (0: off)", &C::top_k, 0, 1 << 20));
  k.push_back(double_key("sampling.min_p", "--min-p", "default min_p (0: off)", &C::min_p, 0, 1));
  k.push_back(double_key("sampling.repeat_penalty", "--repeat-penalty",
                         "default repetition penalty (1: off)", &C::repeat_penalty, 0.01, 10));
  k.push_back(int_key("sampling.max_tokens", "--max-tokens", "default max_tokens", &C::max_tokens,
                      1, 1 << 24));
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
  k.push_back(int_key("api_server.shutdown_timeout_s", "--shutdown-timeout-s",
                      "on SIGTERM, seconds in-flight requests get to finish",
                      &C::shutdown_timeout_s, 0, 86'400));
  k.push_back(int_key("api_server.retry_after_s", "--retry-after-s",
                      "Retry-After seconds on 429/503", &C::retry_after_s, 1, 3600));
  k.push_back(bool_key("api_server.log_requests", "--log-requests",
                       "one JSON log line per request on stderr", &C::log_requests));
  return k;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

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
    if (!section.second.IsMap())
      fail(source_name, ": section '", section_name, "' must be a mapping");
    for (const auto& entry : section.second) {
      const std::string path = section_name + "." + entry.first.as<std::string>();
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
  std::ifstream in(yaml_path);
  if (!in) fail(yaml_path, ": cannot open the config file");
  std::stringstream text;
  text << in.rdbuf();
  apply_config_yaml(config, text.str(), yaml_path);
}

void load_api_key(ServerConfig& config) {
  if (config.api_key_file.empty()) return;
  std::ifstream in(config.api_key_file);
  if (!in) fail("config: api_server.api_key_file: cannot open '", config.api_key_file, "'");
  std::stringstream text;
  text << in.rdbuf();
  config.api_key = trim(text.str());
  if (config.api_key.empty()) {
    fail("config: api_server.api_key_file: '", config.api_key_file, "' holds no key");
  }
}

}  // namespace k25
