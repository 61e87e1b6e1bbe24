// k25_engine_options.settings: the engine's settings by the server config's names and values.
#include "capi/engine_settings.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "server/config.h"

namespace k25 {
namespace {

TEST(EngineSettings, ValuesReachTheEngineAndFlashOptions) {
  EngineSetup s;
  for (const char* setting :
       {"engine.threads=3", "engine.step_position_cost=0.25", "engine.queue_timeout_s=7",
        "flash_scheduler.l2_cache_size_mb=64", "flash_scheduler.l2_page_tokens=32",
        "flash_scheduler.kv_cache_dtype=f16", "flash_scheduler.prefix_cache=false",
        "flash_scheduler.l3_prefetcher=none", "flash_scheduler.speculative=ngram",
        "flash_scheduler.speculative_max_batch=2", "flash_scheduler.rule_pruning=on",
        "flash_scheduler.rule_ffn_skip_fraction=0.2", "model.flash_metadata=/tmp/meta"}) {
    apply_engine_setting(s, setting);
  }
  EXPECT_EQ(s.engine.n_threads, 3);
  EXPECT_DOUBLE_EQ(s.engine.position_cost, 0.25);
  EXPECT_EQ(s.engine.queue_timeout_ms, 7000);
  EXPECT_EQ(s.engine.kv_budget_bytes, size_t{64} << 20);
  EXPECT_EQ(s.engine.kv_page_tokens, 32);
  EXPECT_EQ(s.engine.kv_dtype, KvDtype::kF16);
  EXPECT_FALSE(s.engine.prefix_cache);
  EXPECT_FALSE(s.engine.l3_session_prefetch);
  EXPECT_EQ(s.speculative, SpeculativeMode::kNgram);
  EXPECT_EQ(s.engine.speculation.max_batch, 2);
  EXPECT_EQ(s.flash.rule_mode, "on");
  EXPECT_DOUBLE_EQ(s.flash.rule.ffn_skip_fraction, 0.2);
  EXPECT_EQ(s.flash.metadata_dir, "/tmp/meta");
}

TEST(EngineSettings, BadKeysAndValuesAreRefusedByName) {
  EngineSetup s;
  for (const char* bad :
       {"flash_scheduler.no_such_key=1", "api_server.port=80", "engine.threads=-1",
        "engine.threads=2x", "engine.threads=", "flash_scheduler.l2_page_tokens=12",
        "flash_scheduler.prefix_cache=maybe", "flash_scheduler.l3_backend=s3", "no equals sign"}) {
    try {
      apply_engine_setting(s, bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}

TEST(EngineSettings, L3AndTheSharedTierNeedTheirCompanions) {
  EngineSetup s;
  apply_engine_setting(s, "flash_scheduler.l3_enabled=true");
  EXPECT_THROW(finish_engine_setup(s, "model.gguf"), Error);  // no device
  apply_engine_setting(s, "flash_scheduler.l3_device=/tmp/k25.l3");
  apply_engine_setting(s, "flash_scheduler.l3_cache_size_gb=0.5");
  finish_engine_setup(s, "model.gguf");
  EXPECT_EQ(s.engine.l3_path, "/tmp/k25.l3");
  EXPECT_EQ(s.engine.l3_capacity_bytes, uint64_t{1} << 29);
  EXPECT_NE(s.engine.l3_content_tag, 0u);

  EngineSetup redis;
  apply_engine_setting(redis, "flash_scheduler.l3_backend=redis");
  EXPECT_THROW(finish_engine_setup(redis, "model.gguf"), Error);  // no URL
}

// The names are the server's: every engine setting but the Redis secret (which the config file
// holds in a file) is a key of k25_config.yaml.
TEST(EngineSettings, EveryKeyIsAServerConfigKey) {
  std::vector<std::string> config;
  for (const ConfigKey& key : config_keys()) config.push_back(key.path);
  for (const std::string& key : engine_setting_keys()) {
    if (key == "flash_scheduler.redis_password") continue;
    EXPECT_NE(std::find(config.begin(), config.end(), key), config.end()) << key;
  }
}

}  // namespace
}  // namespace k25
