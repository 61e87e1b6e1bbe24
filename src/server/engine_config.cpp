#include "server/engine_config.h"

#include <charconv>
#include <type_traits>

namespace k25 {

namespace {

std::string setting_text(bool value) {
  return value ? "true" : "false";
}
std::string setting_text(const std::string& value) {
  return value;
}
template <typename T>
requires std::is_arithmetic_v<T> std::string setting_text(T value) {
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;  // round-trips
  return std::string(buffer, end);
}

}  // namespace

std::vector<std::string> engine_settings(const ServerConfig& c) {
  std::vector<std::string> out;
  const auto add = [&out](const char* key, const auto& value) {
    out.push_back(std::string(key) + "=" + setting_text(value));
  };
  add("engine.threads", c.threads);
  add("engine.context_size", c.context_size);
  add("engine.max_queue", c.max_queue);
  add("engine.step_token_budget", c.step_token_budget);
  add("engine.step_position_cost", c.step_position_cost);
  add("engine.target_step_ms", c.target_step_ms);
  add("engine.queue_timeout_s", c.queue_timeout_s);
  add("engine.debug_step_delay_ms", c.debug_step_delay_ms);
  add("engine.debug_fault", c.debug_fault);
  add("flash_scheduler.max_batch_size", c.max_batch_size);
  add("flash_scheduler.micro_task_tokens", c.micro_task_tokens);
  add("flash_scheduler.aging_per_second", c.aging_per_second);
  add("flash_scheduler.batch_timeout_ms", c.batch_timeout_ms);
  add("flash_scheduler.l2_cache_size_mb", c.l2_cache_size_mb);
  add("flash_scheduler.l2_page_tokens", c.l2_page_tokens);
  add("flash_scheduler.kv_cache_dtype", c.kv_cache_dtype);
  add("flash_scheduler.prefix_cache", c.prefix_cache);
  add("flash_scheduler.l1_cache_size", c.l1_cache_size);
  add("flash_scheduler.l3_enabled", c.l3_enabled);
  add("flash_scheduler.l3_device", c.l3_device);
  add("flash_scheduler.l3_page_size", c.l3_page_size);
  add("flash_scheduler.l3_cache_size_gb", c.l3_cache_size_gb);
  add("flash_scheduler.l3_idle_seconds", c.l3_idle_seconds);
  add("flash_scheduler.l3_prefetcher", c.l3_prefetcher);
  add("flash_scheduler.l3_backend", c.l3_backend);
  add("flash_scheduler.redis_url", c.redis_url);
  add("flash_scheduler.redis_password", c.redis_password);
  add("flash_scheduler.redis_connect_timeout_ms", c.redis_connect_timeout_ms);
  add("flash_scheduler.redis_timeout_ms", c.redis_timeout_ms);
  add("flash_scheduler.redis_read_timeout_ms", c.redis_read_timeout_ms);
  add("flash_scheduler.redis_ttl_seconds", c.redis_ttl_seconds);
  add("flash_scheduler.speculative", c.speculative);
  add("flash_scheduler.speculative_max_batch", c.speculative_max_batch);
  add("flash_scheduler.pruning", c.pruning);
  add("flash_scheduler.adaptive_pruning", c.adaptive_pruning);
  add("flash_scheduler.rule_pruning", c.rule_pruning);
  add("flash_scheduler.rule_max_prompt_tokens", c.rule_max_prompt_tokens);
  add("flash_scheduler.rule_max_response_tokens", c.rule_max_response_tokens);
  add("flash_scheduler.rule_ffn_skip_fraction", c.rule_ffn_skip_fraction);
  add("flash_scheduler.simhash_max_distance", c.simhash_max_distance);
  add("model.flash_metadata", c.flash_metadata);
  return out;
}

}  // namespace k25
