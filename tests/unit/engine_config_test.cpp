// The server hands its configuration to the engine as settings (server/engine_config.h): every
// engine-side value of k25_config.yaml arrives unchanged.
#include "server/engine_config.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "capi_engine.h"

namespace k25 {
namespace {

TEST(EngineConfig, TheServersValuesArriveUnchanged) {
  ServerConfig c;
  set_config_value(c, "engine.threads", "3");
  set_config_value(c, "engine.step_position_cost", "0.0123456789");
  set_config_value(c, "flash_scheduler.aging_per_second", "2.5");
  set_config_value(c, "flash_scheduler.kv_cache_dtype", "f32");
  set_config_value(c, "flash_scheduler.l3_enabled", "true");
  set_config_value(c, "flash_scheduler.l3_device", "/tmp/k25 test.l3");
  set_config_value(c, "flash_scheduler.l3_idle_seconds", "0.5");
  set_config_value(c, "flash_scheduler.pruning", "false");
  set_config_value(c, "flash_scheduler.rule_ffn_skip_fraction", "0.3");
  set_config_value(c, "flash_scheduler.speculative", "auto");
  set_config_value(c, "engine.debug_fault", "bad_alloc:step=3");
  c.redis_password = "a=b c";  // what load_redis_password read from its file
  const EngineSetup s = testing::engine_setup_of(c);
  EXPECT_EQ(s.engine.n_threads, 3);
  EXPECT_EQ(s.engine.position_cost, 0.0123456789);  // bit for bit
  EXPECT_EQ(s.engine.aging_per_second, 2.5);
  EXPECT_EQ(s.engine.kv_dtype, KvDtype::kF32);
  EXPECT_TRUE(s.l3_enabled);
  EXPECT_EQ(s.l3_device, "/tmp/k25 test.l3");
  EXPECT_EQ(s.engine.l3_idle_seconds, 0.5);
  EXPECT_FALSE(s.flash.pruning_enabled);
  EXPECT_EQ(s.flash.rule.ffn_skip_fraction, 0.3);
  EXPECT_EQ(s.speculative, SpeculativeMode::kAuto);
  EXPECT_EQ(s.engine.debug_fault, "bad_alloc:step=3");
  EXPECT_EQ(s.redis_password, "a=b c");
}

TEST(EngineConfig, TheDefaultsAreTheServersDefaults) {
  const ServerConfig c;
  const EngineSetup s = testing::engine_setup_of(c);
  EXPECT_EQ(s.engine.max_batch_size, c.max_batch_size);
  EXPECT_EQ(s.engine.queue_timeout_ms, c.queue_timeout_s * 1000);
  EXPECT_EQ(to_string(s.engine.kv_dtype), c.kv_cache_dtype);
  EXPECT_EQ(s.engine.kv_page_tokens, c.l2_page_tokens);
  EXPECT_EQ(s.engine.l3_session_prefetch, c.l3_prefetcher == "lru-k");
  EXPECT_EQ(s.flash.rule_mode, c.rule_pruning);
  EXPECT_EQ(s.flash.adaptive, c.adaptive_pruning);
}

// The server passes every setting the engine has, each once.
TEST(EngineConfig, EveryEngineSettingIsPassed) {
  std::vector<std::string> passed;
  for (const std::string& setting : engine_settings(ServerConfig{})) {
    passed.push_back(setting.substr(0, setting.find('=')));
  }
  std::sort(passed.begin(), passed.end());
  std::vector<std::string> keys = engine_setting_keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(passed, keys);
}

}  // namespace
}  // namespace k25
