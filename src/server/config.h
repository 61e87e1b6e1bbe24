// k25-server configuration (R-CFG1): k25_config.yaml sections model, flash_scheduler, engine,
// sampling, api_server, warmup and fallback; every scalar key can also be set by a command-line
// flag, which wins.
// Unknown keys and invalid values are rejected with a message naming the key.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace k25 {

// One warm-up ("shadow") request run at start (R-CFG2).
struct WarmupPrompt {
  std::string domain = "default";
  std::string prompt;
};

struct ServerConfig {
  // model
  std::string model_path;
  std::string chat_template_file;  // a Jinja chat template that replaces the model's
  std::string chat_template;       // its text, read by load_chat_template()
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  // flash_scheduler (the KV tiers read the cache keys when they land)
  int l1_cache_size = 0;  // off: measured not to pay on the CPUs tried (docs/kv-cache.md)
  std::string l1_eviction_policy = "lru";
  bool l3_enabled = false;
  std::string l3_device;
  int l3_page_size = 4096;
  double l3_cache_size_gb = 4;  // disk budget of the L3 tier
  double l3_idle_seconds = 60;  // cached KV unused this long moves to L3 (0: only when L2 is full)
  bool prefix_cache = true;     // reuse cached KV of equal prompt prefixes (R-KV4)
  std::string l3_prefetcher = "lru-k";
  // The L3 tier: the local disk (l3_enabled + l3_device), a Redis shared by replicas, or both
  // (docs/kv-cache.md "Shared tier on Redis"). redis and disk+redis turn L3 on by themselves.
  std::string l3_backend = "disk";
  std::string redis_url;            // redis://[user@]host:port[/db], comma-separated: a cluster
  std::string redis_password_file;  // first line: the password (AUTH); "" = none
  std::string redis_password;       // read from redis_password_file by load_redis_password()
  int redis_connect_timeout_ms = 200;
  int redis_timeout_ms = 200;       // per socket wait of a pipeline
  int redis_read_timeout_ms = 500;  // a prompt waits this long for the shared tier at most
  int redis_ttl_seconds = 3600;     // EX of every page (renewed when read)
  int max_batch_size = 24;
  int batch_timeout_ms = 10;
  // gated pruning (R-PR3, docs/flash.md)
  std::string flash_metadata;    // k25_metadata dir; "" = <model.path>/k25_metadata if there
  bool pruning = true;           // false: every request runs the full model
  bool adaptive_pruning = true;  // Level 3 (--disable-adaptive-pruning)
  // Speculative decoding (engine/speculation.h): a request's default "speculative" mode (off,
  // ngram, auto), and the decode batch above which steps draft nothing.
  std::string speculative = "off";
  int speculative_max_batch = 4;
  std::string rule_pruning = "auto";  // Level 1: auto (on with calibrated metadata), on, off
  int rule_max_prompt_tokens = 512;
  int rule_max_response_tokens = 128;
  double rule_ffn_skip_fraction = 0.1;  // the note's 4 of 40 blocks, scaled with depth
  int simhash_max_distance = 10;
  int l2_cache_size_mb = 0;  // L2 KV pool budget; 0: max_batch_size sequences of full context
  int l2_page_tokens = 16;   // positions per KV page
  std::string kv_cache_dtype = "f16";  // element type of stored K and V rows (f32 | f16)
  int micro_task_tokens = 128;         // prefill micro-task (R-EB2)
  double aging_per_second = 10;        // priority points per second without service (R-EB3)
  // engine
  int threads = 0;              // 0: hardware concurrency
  int context_size = 0;         // 0: the model's context length
  int step_token_budget = 512;  // tokens per forward call
  int max_queue = 256;          // waiting requests before 429
  int queue_timeout_s = 600;    // a request not started after this long fails (0: no limit)
  int debug_step_delay_ms = 0;  // testing aid: sleep before every forward call
  std::string debug_fault;      // testing aid: an exception inside a step (engine/step_fault.h)
  // step budget a token takes per position of context; -1: estimated from the model
  double step_position_cost = -1;
  double target_step_ms = 150;  // > 0: a ceiling on step time (engine.target_step_ms)
  // sampling defaults for fields a request leaves out
  double temperature = 0.8;
  double top_p = 0.95;
  int top_k = 40;
  double min_p = 0.05;
  double repeat_penalty = 1.0;
  int max_tokens = 0;  // 0: the rest of the context
  // api_server
  std::string host = "127.0.0.1";
  int port = 8080;
  bool enable_header_passthrough = true;
  std::string api_key_file;
  std::string api_key;  // flag only (--api-key); a key file is the way to keep it off `ps`
  int64_t max_body_bytes = 1 << 20;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  int idle_timeout_s = 60;  // keep-alive connections with no request for this long are closed
  int io_threads = 2;
  int max_connections = 0;  // over it: a quick 503; 0 = the file-descriptor limit less a reserve
  // Events a streaming client has not taken yet, per connection; beyond: the request is cancelled
  int64_t stream_buffer_bytes = 256 << 10;
  int shutdown_timeout_s = 30;
  int retry_after_s = 1;
  bool log_requests = true;
  std::string log_format = "json";  // json | text (request lines)
  // warmup (R-CFG2): `warmup.prompts` in the file, plus one JSON object per line of `warmup.file`
  std::vector<WarmupPrompt> warmup;
  std::string warmup_file;
  int warmup_max_tokens = 8;
  // fallback (R-CFG3); no url: no fallback, requests never time out
  std::string fallback_url;
  // a request waiting for its first token times out after this long without progress
  int fallback_timeout_ms = 10'000;
  int fallback_failure_threshold = 3;
  int fallback_probe_interval_s = 10;
};

// One configuration key: "section.key", its flag and help, and how a text value is applied.
struct ConfigKey {
  std::string path;  // "api_server.port"
  std::string flag;  // "--port"
  std::string help;
  // Parses and validates `value`, throws k25::Error naming the key when it is invalid.
  std::function<void(ServerConfig&, const std::string& value)> apply;
};

const std::vector<ConfigKey>& config_keys();

// Keys that were accepted once but never had an effect: set_config_value (file or flag) refuses
// them with an error that says so, rather than "unknown key", so that an old file is fixed
// knowingly.
struct RemovedConfigKey {
  std::string path;
  std::string flag;
  std::string reason;
};
const std::vector<RemovedConfigKey>& removed_config_keys();

// Applies one "section.key" = text value; unknown keys and invalid values throw k25::Error.
void set_config_value(ServerConfig& config, const std::string& path, const std::string& value);

// Reads a YAML file with the sections above. Throws k25::Error (file, key and problem).
void apply_config_file(ServerConfig& config, const std::string& yaml_path);
// Same from YAML text (tests, and the file reader).
void apply_config_yaml(ServerConfig& config, const std::string& yaml_text,
                       const std::string& source_name);

// Reads api_key_file into api_key when set (whitespace trimmed; an empty key is an error).
void load_api_key(ServerConfig& config);
// Reads the first line of redis_password_file into redis_password when set (an empty one is an
// error).
void load_redis_password(ServerConfig& config);

// Reads chat_template_file into chat_template when set. A file that cannot be read, is empty or
// does not parse as a template is an error naming it (at start-up, not at the first request).
void load_chat_template(ServerConfig& config);

// Appends the prompts of warmup_file (one {"domain": ..., "prompt": ...} per line; blank lines
// skipped) to warmup. Throws k25::Error naming the file and line.
void load_warmup_file(ServerConfig& config);

}  // namespace k25
