// Configuration of the operations features: warm-up prompts (inline and file), fallback keys,
// the log format; and the text form of a request log line.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "parse_error.h"
#include "server/config.h"
#include "server/request_log.h"

namespace k25 {
namespace {

using testing::error_of;

TEST(OpsConfig, WarmupPromptsInlineAndAsShortList) {
  ServerConfig c;
  apply_config_yaml(c, R"(
warmup:
  prompts:
    - {domain: default, prompt: "Once upon a time"}
    - prompt: "The dog"
  max_tokens: 4
)",
                    "t.yaml");
  ASSERT_EQ(c.warmup.size(), 2u);
  EXPECT_EQ(c.warmup[0].domain, "default");
  EXPECT_EQ(c.warmup[0].prompt, "Once upon a time");
  EXPECT_EQ(c.warmup[1].domain, "default");
  EXPECT_EQ(c.warmup_max_tokens, 4);
  ServerConfig d;
  apply_config_yaml(d, "warmup:\n  - {domain: legal, prompt: contract}\n", "t.yaml");
  ASSERT_EQ(d.warmup.size(), 1u);
  EXPECT_EQ(d.warmup[0].domain, "legal");
}

TEST(OpsConfig, WarmupErrorsNameTheEntry) {
  ServerConfig c;
  EXPECT_NE(error_of([&] {
              apply_config_yaml(c, "warmup:\n  - {prompt: x, colour: red}\n", "t");
            }).find("warmup.prompts[0]: unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              apply_config_yaml(c, "warmup:\n  prompts: [{domain: d}]\n", "t");
            }).find("warmup.prompts[0]: empty prompt"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              apply_config_yaml(c, "warmup:\n  prompts: 5\n", "t");
            }).find("warmup.prompts"),
            std::string::npos);
}

TEST(OpsConfig, WarmupFileOneJsonObjectPerLine) {
  const std::string path = ::testing::TempDir() + "warmup_prompts.jsonl";
  {
    std::ofstream out(path);
    out << "{\"domain\": \"default\", \"prompt\": \"Once\"}\n\n{\"prompt\": \"Twice\"}\n";
  }
  ServerConfig c;
  c.warmup.push_back({"default", "inline"});
  c.warmup_file = path;
  load_warmup_file(c);
  ASSERT_EQ(c.warmup.size(), 3u);
  EXPECT_EQ(c.warmup[1].prompt, "Once");
  EXPECT_EQ(c.warmup[2].prompt, "Twice");
  {
    std::ofstream out(path);
    out << "{\"prompt\": \"ok\"}\n{\"prompt\": 7}\n";
  }
  ServerConfig bad;
  bad.warmup_file = path;
  EXPECT_NE(error_of([&] { load_warmup_file(bad); }).find(path + ":2"), std::string::npos);
  std::remove(path.c_str());
}

TEST(OpsConfig, FallbackKeys) {
  ServerConfig c;
  EXPECT_EQ(c.fallback_failure_threshold, 3);
  apply_config_yaml(c, R"(
fallback:
  url: http://127.0.0.1:9000/v1
  timeout_ms: 250
  failure_threshold: 5
  probe_interval_s: 2
engine:
  debug_step_delay_ms: 40
  debug_fault: "bad_alloc:request=3:tokens=2"
api_server:
  log_format: text
)",
                    "t.yaml");
  EXPECT_EQ(c.fallback_url, "http://127.0.0.1:9000/v1");
  EXPECT_EQ(c.fallback_timeout_ms, 250);
  EXPECT_EQ(c.fallback_failure_threshold, 5);
  EXPECT_EQ(c.fallback_probe_interval_s, 2);
  EXPECT_EQ(c.debug_step_delay_ms, 40);
  EXPECT_EQ(c.debug_fault, "bad_alloc:request=3:tokens=2");
  EXPECT_EQ(c.log_format, "text");
  EXPECT_NE(
      error_of([&] { set_config_value(c, "fallback.url", "https://x"); }).find("fallback.url"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              set_config_value(c, "fallback.failure_threshold", "0");
            }).find("fallback.failure_threshold"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              set_config_value(c, "engine.debug_fault", "segfault:step=1");
            }).find("config: engine.debug_fault 'segfault:step=1': the kind must be"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              set_config_value(c, "api_server.log_format", "xml");
            }).find("api_server.log_format"),
            std::string::npos);
}

TEST(OpsConfig, TextLogLine) {
  RequestLog log;
  log.method = "POST";
  log.path = "/v1/completions";
  log.status = 200;
  log.id = "cmpl-3";
  log.sla = "gold";
  log.domain = "default";
  log.flash_level = 0;
  log.prompt_tokens = 4;
  log.completion_tokens = 8;
  log.served_by = "fallback";
  log.timed_out = true;
  log.error = "a \"quoted\" thing";
  const std::string line = log.text_line();
  EXPECT_NE(line.find(" request POST /v1/completions 200 "), std::string::npos) << line;
  for (const char* part : {" id=cmpl-3", " sla=gold", " domain=default", " flash_level=0",
                           " prompt_tokens=4", " completion_tokens=8", " served_by=fallback",
                           " timed_out=true", " error=\"a \\\"quoted\\\" thing\""}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " in " << line;
  }
  const std::string json = log.line();
  EXPECT_NE(json.find("\"flash_level\":0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"served_by\":\"fallback\""), std::string::npos) << json;
}

}  // namespace
}  // namespace k25
