#include "server/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "parse_error.h"
#include "server/command_line.h"

namespace k25 {
namespace {

using testing::error_of;

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "k25-server");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_server_command_line(static_cast<int>(argv.size()), argv.data());
}

TEST(Config, ShippedConfigFileSetsEveryKeyAndLoads) {
  const std::string path =
      (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() /
       "k25_config.yaml")
          .string();
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const ConfigKey& key : config_keys()) {
    const std::string name = key.path.substr(key.path.find('.') + 1);
    EXPECT_NE(text.find("\n  " + name + ":"), std::string::npos) << key.path << " missing";
  }
  ServerConfig config;
  apply_config_file(config, path);
  EXPECT_EQ(config.host, "127.0.0.1");
  EXPECT_EQ(config.port, 8080);
  EXPECT_EQ(config.max_batch_size, 24);
}

TEST(Config, NoteSectionsParse) {
  ServerConfig c;
  apply_config_yaml(c, R"(
model:
  path: ./qwen-14b-k25
  tensor_parallel_size: 2
flash_scheduler:
  l1_cache_size: 256
  l1_eviction_policy: fifo
  l3_enabled: true
  l3_device: /dev/nvme0n1
  max_batch_size: 8
  batch_timeout_ms: 5
api_server:
  host: 0.0.0.0
  port: 9000
  enable_header_passthrough: false
)",
                    "test.yaml");
  EXPECT_EQ(c.model_path, "./qwen-14b-k25");
  EXPECT_EQ(c.tensor_parallel_size, 2);
  EXPECT_EQ(c.l1_cache_size, 256);
  EXPECT_EQ(c.l1_eviction_policy, "fifo");
  EXPECT_TRUE(c.l3_enabled);
  EXPECT_EQ(c.l3_device, "/dev/nvme0n1");
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_EQ(c.host, "0.0.0.0");
  EXPECT_EQ(c.port, 9000);
  EXPECT_FALSE(c.enable_header_passthrough);
}

TEST(Config, UnknownKeysAndInvalidValuesNameTheKey) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"api_server:\n  prot: 80\n", "api_server.prot"},
      {"nonsense:\n  a: 1\n", "nonsense.a"},
      {"api_server:\n  port: 70000\n", "api_server.port"},
      {"api_server:\n  port: eighty\n", "api_server.port"},
      {"flash_scheduler:\n  l1_eviction_policy: random\n", "flash_scheduler.l1_eviction_policy"},
      {"flash_scheduler:\n  l3_enabled: maybe\n", "flash_scheduler.l3_enabled"},
      {"flash_scheduler:\n  max_batch_size: 0\n", "flash_scheduler.max_batch_size"},
      {"sampling:\n  top_p: 1.5\n", "sampling.top_p"},
      {"api_server:\n  port: [1, 2]\n", "api_server.port"},
      {"- a\n- b\n", "top level"},
      {"api_server: {port: 1\n", "invalid YAML"},
  };
  for (const Case& c : cases) {
    ServerConfig config;
    std::string message = error_of([&] { apply_config_yaml(config, c.yaml, "k.yaml"); });
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.yaml << " -> " << message;
  }
}

// Keys that never had an effect are refused, in the file and as flags, with a message that says
// they were removed (not "unknown key").
TEST(Config, RemovedKeysAreRefusedByName) {
  for (const char* key : {"l2_cache_shards", "l2_prefetch_distance"}) {
    ServerConfig config;
    const std::string yaml = std::string("flash_scheduler:\n  ") + key + ": 8\n";
    const std::string message = error_of([&] { apply_config_yaml(config, yaml, "k.yaml"); });
    EXPECT_NE(message.find(std::string("k.yaml: config: flash_scheduler.") + key +
                           " was removed: it had no effect"),
              std::string::npos)
        << message;
  }
  for (const char* flag : {"--l2-cache-shards", "--l2-prefetch-distance"}) {
    const std::string message = error_of([&] { parse({flag, "8"}); });
    EXPECT_NE(message.find(" was removed: it had no effect"), std::string::npos) << message;
  }
  EXPECT_EQ(parse({"--help"}).output.find("l2-cache-shards"), std::string::npos);
}

TEST(CommandLine, FlagsOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "/k25_cli_test.yaml";
  {
    std::ofstream out(path);
    out << "api_server:\n  port: 9000\n  host: 0.0.0.0\nmodel:\n  path: a.gguf\n";
  }
  CommandLine cl = parse({"--config", path, "--port", "9100", "--model", "b.gguf"});
  ASSERT_FALSE(cl.exit_code);
  EXPECT_EQ(cl.config.port, 9100);
  EXPECT_EQ(cl.config.host, "0.0.0.0");
  EXPECT_EQ(cl.config.model_path, "b.gguf");
}

TEST(CommandLine, InvalidFlagValueNamesTheKey) {
  std::string message = error_of([] { parse({"--max-batch-size", "-3"}); });
  EXPECT_NE(message.find("flash_scheduler.max_batch_size"), std::string::npos) << message;
  CommandLine cl = parse({"--no-such-flag", "1"});
  EXPECT_EQ(cl.exit_code, 2);
}

TEST(ChatTemplateOption, TheFileIsReadAndParsedAtStart) {
  const std::string good = ::testing::TempDir() + "/k25_chat_template_good.jinja";
  const std::string bad = ::testing::TempDir() + "/k25_chat_template_bad.jinja";
  const std::string empty = ::testing::TempDir() + "/k25_chat_template_empty.jinja";
  std::ofstream(good) << "{% for m in messages %}{{ m.content }}{% endfor %}";
  std::ofstream(bad) << "{% for m in messages %}{{ m.content }}";
  std::ofstream{empty};
  CommandLine cl = parse({"--chat-template", good});
  ASSERT_FALSE(cl.exit_code);
  EXPECT_EQ(cl.config.chat_template, "{% for m in messages %}{{ m.content }}{% endfor %}");
  ServerConfig from_file;
  apply_config_yaml(from_file, "model:\n  chat_template: " + good + "\n", "test");
  load_chat_template(from_file);
  EXPECT_EQ(from_file.chat_template, cl.config.chat_template);

  const std::string missing = error_of([] { parse({"--chat-template", "/no/such/t.jinja"}); });
  EXPECT_NE(missing.find("model.chat_template: '/no/such/t.jinja': cannot open"), std::string::npos)
      << missing;
  const std::string unparsable = error_of([&] { parse({"--chat-template", bad}); });
  EXPECT_NE(unparsable.find("does not parse"), std::string::npos) << unparsable;
  EXPECT_NE(unparsable.find("endfor"), std::string::npos) << unparsable;
  EXPECT_NE(error_of([&] {
              parse({"--chat-template", empty});
            }).find("is empty"),
            std::string::npos);
}

TEST(Config, SharedKvTierKeysAreCheckedWhenRead) {
  ServerConfig c;
  apply_config_yaml(c,
                    "flash_scheduler:\n  l3_backend: disk+redis\n"
                    "  redis_url: redis://k25@127.0.0.1:6380/2\n  redis_timeout_ms: 50\n",
                    "test");
  EXPECT_EQ(c.l3_backend, "disk+redis");
  EXPECT_EQ(c.redis_url, "redis://k25@127.0.0.1:6380/2");
  EXPECT_EQ(c.redis_timeout_ms, 50);
  for (const char* bad : {"flash_scheduler:\n  l3_backend: memcached\n",
                          "flash_scheduler:\n  redis_url: rediss://h:1\n",
                          "flash_scheduler:\n  redis_url: redis://h\n",
                          "flash_scheduler:\n  redis_timeout_ms: 0\n"}) {
    ServerConfig d;
    EXPECT_THROW(apply_config_yaml(d, bad, "test"), Error) << bad;
  }
}

TEST(CommandLine, RedisPasswordComesFromItsFile) {
  const std::string path = ::testing::TempDir() + "/k25_redis_pw";
  { std::ofstream(path) << "s3cret\nignored\n"; }
  EXPECT_EQ(parse({"--redis-password-file", path}).config.redis_password, "s3cret");
  { std::ofstream(path) << "\n"; }
  std::string message = error_of([&] { parse({"--redis-password-file", path}); });
  EXPECT_NE(message.find("redis_password_file"), std::string::npos) << message;
  std::remove(path.c_str());
}

TEST(CommandLine, HelpListsEveryFlag) {
  CommandLine cl = parse({"--help"});
  ASSERT_EQ(cl.exit_code, 0);
  std::set<std::string> flags;
  for (const ConfigKey& key : config_keys()) {
    EXPECT_NE(cl.output.find(key.flag), std::string::npos) << key.flag;
    EXPECT_TRUE(flags.insert(key.flag).second) << "duplicate flag " << key.flag;
  }
  EXPECT_NE(cl.output.find("--config"), std::string::npos);
  EXPECT_NE(cl.output.find("--api-key"), std::string::npos);
}

TEST(CommandLine, ApiKeyFileIsReadAndTheFlagWins) {
  const std::string path = ::testing::TempDir() + "/k25_key";
  {
    std::ofstream out(path);
    out << "  secret-from-file\n";
  }
  EXPECT_EQ(parse({"--api-key-file", path}).config.api_key, "secret-from-file");
  EXPECT_EQ(parse({"--api-key-file", path, "--api-key", "flag"}).config.api_key, "flag");
  std::string message = error_of([] { parse({"--api-key-file", "/nonexistent/key"}); });
  EXPECT_NE(message.find("api_server.api_key_file"), std::string::npos) << message;
}

}  // namespace
}  // namespace k25
