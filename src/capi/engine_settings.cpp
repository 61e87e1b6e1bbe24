#include "capi/engine_settings.h"

#include <charconv>
#include <filesystem>
#include <functional>
#include <map>

#include "core/bits.h"
#include "core/error.h"
#include "engine/step_fault.h"
#include "kernels/kv_dtype.h"
#include "kv/redis_url.h"
#include "kv/shared_kv_namespace.h"

namespace k25 {

namespace {

using Setter = std::function<void(EngineSetup&, std::string_view value, const std::string& key)>;

template <typename T>
T parse_number(std::string_view value, const std::string& key, T min, T max) {
  T n{};
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    fail("setting ", key, ": '", value, "' is not a number");
  }
  if (n < min || n > max) fail("setting ", key, ": ", n, " is outside [", min, ", ", max, "]");
  return n;
}

int int_value(std::string_view v, const std::string& key, int min, int max) {
  return parse_number<int>(v, key, min, max);
}

double double_value(std::string_view v, const std::string& key, double min, double max) {
  return parse_number<double>(v, key, min, max);
}

bool bool_value(std::string_view v, const std::string& key) {
  if (v == "true" || v == "on" || v == "1") return true;
  if (v == "false" || v == "off" || v == "0") return false;
  fail("setting ", key, ": '", v, "' is not true or false");
}

int power_of_two(std::string_view v, const std::string& key, int min, int max) {
  const int n = int_value(v, key, min, max);
  if (!is_power_of_two(n)) fail("setting ", key, ": ", n, " is not a power of 2");
  return n;
}

std::string one_of(std::string_view v, const std::string& key,
                   std::initializer_list<std::string_view> allowed) {
  for (std::string_view a : allowed) {
    if (v == a) return std::string(v);
  }
  std::string names;
  for (std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
  fail("setting ", key, ": '", v, "' is not one of ", names);
}

const std::map<std::string, Setter, std::less<>>& setters() {
  using S = EngineSetup;
  using V = std::string_view;
  using K = const std::string&;
  static const std::map<std::string, Setter, std::less<>> table = {
      {"engine.threads", [](S& s, V v, K k) { s.engine.n_threads = int_value(v, k, 0, 1024); }},
      {"engine.context_size",
       [](S& s, V v, K k) { s.engine.context_size = int_value(v, k, 0, 1 << 24); }},
      {"engine.max_queue",
       [](S& s, V v, K k) { s.engine.max_queue = int_value(v, k, 0, 1 << 20); }},
      {"engine.step_token_budget",
       [](S& s, V v, K k) { s.engine.step_token_budget = int_value(v, k, 1, 1 << 20); }},
      {"engine.step_position_cost",
       [](S& s, V v, K k) { s.engine.position_cost = double_value(v, k, -1, 1e6); }},
      {"engine.target_step_ms",
       [](S& s, V v, K k) { s.engine.target_step_ms = double_value(v, k, 0, 1e6); }},
      {"engine.queue_timeout_s",
       [](S& s, V v, K k) { s.engine.queue_timeout_ms = int_value(v, k, 0, 1 << 20) * 1000; }},
      {"engine.debug_step_delay_ms",
       [](S& s, V v, K k) { s.engine.debug_step_delay_ms = int_value(v, k, 0, 600000); }},
      {"engine.debug_fault",
       [](S& s, V v, K) {
         try {
           parse_step_fault(std::string(v));  // a bad spec stops the start
         } catch (const Error& e) {
           fail("setting engine.", e.what());  // "debug_fault '<spec>': ..."
         }
         s.engine.debug_fault = std::string(v);
       }},
      {"flash_scheduler.max_batch_size",
       [](S& s, V v, K k) { s.engine.max_batch_size = int_value(v, k, 1, 4096); }},
      {"flash_scheduler.micro_task_tokens",
       [](S& s, V v, K k) { s.engine.micro_task_tokens = int_value(v, k, 1, 1 << 20); }},
      {"flash_scheduler.aging_per_second",
       [](S& s, V v, K k) { s.engine.aging_per_second = double_value(v, k, 0, 1e6); }},
      {"flash_scheduler.batch_timeout_ms",
       [](S& s, V v, K k) { s.engine.batch_timeout_ms = int_value(v, k, 0, 60000); }},
      {"flash_scheduler.l2_cache_size_mb",
       [](S& s, V v, K k) {
         s.engine.kv_budget_bytes = static_cast<size_t>(int_value(v, k, 0, 1 << 24)) << 20;
       }},
      {"flash_scheduler.l2_page_tokens",
       [](S& s, V v, K k) { s.engine.kv_page_tokens = power_of_two(v, k, 1, 4096); }},
      {"flash_scheduler.kv_cache_dtype",
       [](S& s, V v, K k) { s.engine.kv_dtype = parse_kv_dtype(v, "setting " + k); }},
      {"flash_scheduler.prefix_cache",
       [](S& s, V v, K k) { s.engine.prefix_cache = bool_value(v, k); }},
      {"flash_scheduler.l1_cache_size",
       [](S& s, V v, K k) { s.engine.l1_window = int_value(v, k, 0, 1 << 24); }},
      {"flash_scheduler.l3_enabled", [](S& s, V v, K k) { s.l3_enabled = bool_value(v, k); }},
      {"flash_scheduler.l3_device", [](S& s, V v, K) { s.l3_device = std::string(v); }},
      {"flash_scheduler.l3_page_size",
       [](S& s, V v, K k) {
         s.engine.l3_page_size = static_cast<uint32_t>(power_of_two(v, k, 512, 1 << 24));
       }},
      {"flash_scheduler.l3_cache_size_gb",
       [](S& s, V v, K k) { s.l3_cache_size_gb = double_value(v, k, 0, 1 << 20); }},
      {"flash_scheduler.l3_idle_seconds",
       [](S& s, V v, K k) { s.engine.l3_idle_seconds = double_value(v, k, 0, 1e9); }},
      {"flash_scheduler.l3_prefetcher",
       [](S& s, V v, K k) {
         s.engine.l3_session_prefetch = one_of(v, k, {"lru-k", "none"}) == "lru-k";
       }},
      {"flash_scheduler.l3_backend",
       [](S& s, V v, K k) {
         s.l3_backend = one_of(v, k, {"disk", "redis", "disk+redis"});
       }},
      {"flash_scheduler.redis_url",
       [](S& s, V v, K) {
         try {
           if (!v.empty()) parse_redis_url(v);  // "": no shared tier
         } catch (const Error& e) {
           fail("setting flash_scheduler.", e.what());  // "redis_url: ..."
         }
         s.redis_url = std::string(v);
       }},
      {"flash_scheduler.redis_password", [](S& s, V v, K) { s.redis_password = std::string(v); }},
      {"flash_scheduler.redis_connect_timeout_ms",
       [](S& s, V v, K k) {
         s.engine.redis.store.connect_timeout =
             std::chrono::milliseconds(int_value(v, k, 1, 600000));
       }},
      {"flash_scheduler.redis_timeout_ms",
       [](S& s, V v, K k) {
         s.engine.redis.store.command_timeout =
             std::chrono::milliseconds(int_value(v, k, 1, 600000));
       }},
      {"flash_scheduler.redis_read_timeout_ms",
       [](S& s, V v, K k) {
         s.engine.redis.read_timeout = std::chrono::milliseconds(int_value(v, k, 1, 600000));
       }},
      {"flash_scheduler.redis_ttl_seconds",
       [](S& s, V v, K k) { s.engine.redis.store.ttl_seconds = int_value(v, k, 0, 1 << 30); }},
      {"flash_scheduler.speculative",
       [](S& s, V v, K k) {
         const std::optional<SpeculativeMode> mode = parse_speculative_mode(v);
         if (!mode) fail("setting ", k, ": '", v, "' is not off, ngram, self or auto");
         s.speculative = *mode;
       }},
      {"flash_scheduler.speculative_max_batch",
       [](S& s, V v, K k) { s.engine.speculation.max_batch = int_value(v, k, 0, 4096); }},
      {"flash_scheduler.pruning",
       [](S& s, V v, K k) { s.flash.pruning_enabled = bool_value(v, k); }},
      {"flash_scheduler.adaptive_pruning",
       [](S& s, V v, K k) { s.flash.adaptive = bool_value(v, k); }},
      {"flash_scheduler.rule_pruning",
       [](S& s, V v, K k) {
         s.flash.rule_mode = one_of(v, k, {"auto", "on", "off"});
       }},
      {"flash_scheduler.rule_max_prompt_tokens",
       [](S& s, V v, K k) { s.flash.rule.max_prompt_tokens = int_value(v, k, 0, 1 << 24); }},
      {"flash_scheduler.rule_max_response_tokens",
       [](S& s, V v, K k) { s.flash.rule.max_response_tokens = int_value(v, k, 0, 1 << 24); }},
      {"flash_scheduler.rule_ffn_skip_fraction",
       [](S& s, V v, K k) { s.flash.rule.ffn_skip_fraction = double_value(v, k, 0, 1); }},
      {"flash_scheduler.simhash_max_distance",
       [](S& s, V v, K k) { s.flash.simhash_max_distance = int_value(v, k, 0, 64); }},
      {"model.flash_metadata", [](S& s, V v, K) { s.flash.metadata_dir = std::string(v); }},
  };
  return table;
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

}  // namespace

void apply_engine_setting(EngineSetup& setup, std::string_view setting) {
  const size_t eq = setting.find('=');
  if (eq == std::string_view::npos) fail("setting '", setting, "' is not key=value");
  const std::string key(setting.substr(0, eq));
  const auto it = setters().find(key);
  if (it == setters().end()) fail("setting ", key, ": the engine has no such setting");
  it->second(setup, setting.substr(eq + 1), key);
}

void finish_engine_setup(EngineSetup& setup, const std::string& model_path) {
  using Backend = EngineOptions::L3Backend;
  EngineOptions& o = setup.engine;
  if (setup.l3_enabled) {
    if (setup.l3_device.empty()) fail("setting flash_scheduler.l3_enabled needs l3_device");
    o.l3_path = setup.l3_device;
    o.l3_capacity_bytes = static_cast<uint64_t>(setup.l3_cache_size_gb * (1 << 30));
    o.l3_content_tag = model_file_tag(model_path);
  }
  if (setup.l3_backend == "disk") return;
  // redis / disk+redis: where the shared KV tier is and what it is keyed by
  // (kv/shared_kv_namespace.h: the model file's content, not its path).
  if (setup.redis_url.empty()) {
    fail("setting flash_scheduler.l3_backend ", setup.l3_backend,
         " needs flash_scheduler.redis_url");
  }
  o.l3_backend = setup.l3_backend == "redis" ? Backend::kRedis : Backend::kDiskAndRedis;
  if (o.l3_backend == Backend::kDiskAndRedis && o.l3_path.empty()) {
    fail(
        "setting flash_scheduler.l3_backend disk+redis needs flash_scheduler.l3_enabled and "
        "l3_device");
  }
  RedisStoreOptions& store = o.redis.store;
  store.address = parse_redis_url(setup.redis_url);
  store.credentials = {store.address.user, setup.redis_password};
  o.shared_weights_hash = weights_content_hash(model_path);
}

std::vector<std::string> engine_setting_keys() {
  std::vector<std::string> keys;
  for (const auto& [key, setter] : setters()) keys.push_back(key);
  return keys;
}

}  // namespace k25
