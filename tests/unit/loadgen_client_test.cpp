// k25-bench's client and runner against a scripted in-process HTTP server: a streamed answer is
// timed and counted, a 429 is retried after Retry-After when asked, a mid-stream error event and
// an HTTP error body become the request's error, and the request carries the documented fields.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "scripted_http_server.h"

namespace k25::loadgen {
namespace {

using test_http::chunked;
using test_http::ScriptedServer;

using tcp = net::ip::tcp;

std::string text_event(const std::string& text) {
  return "data: " + nlohmann::json{{"choices", {{{"text", text}, {"index", 0}}}}}.dump() + "\n\n";
}

const std::string kUsage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n";

std::vector<PreparedRequest> requests(int n) {
  std::vector<PreparedRequest> out;
  for (int i = 0; i < n; ++i) {
    PreparedRequest r;
    r.plan.id = i;
    r.plan.sla = "gold";
    r.plan.length_class = "short";
    r.prompt = "Once upon a time " + std::to_string(i);
    r.prompt_tokens = 6;
    out.push_back(r);
  }
  return out;
}

RunOptions options_for(const ScriptedServer& server) {
  RunOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.model = "m";
  o.max_tokens = 3;
  o.progress = false;
  o.timeout_s = 30;
  return o;
}

TEST(LoadgenClient, StreamedAnswerIsTimedAndCounted) {
  // The first text event is split across chunks; an empty text chunk does not count as a token.
  const std::string first = text_event("Once");
  ScriptedServer server(
      {chunked({first.substr(0, 10), first.substr(10), text_event(""), text_event(" upon"),
                text_event(" a"), kUsage, "data: [DONE]\n\n"})});
  RunResult result = run_requests(options_for(server), requests(2));
  ASSERT_EQ(result.records.size(), 2u);
  for (const RequestRecord& r : result.records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.http_status, 200);
    ASSERT_TRUE(r.ttft_ms);
    EXPECT_LE(*r.ttft_ms, r.e2e_ms);
    EXPECT_EQ(r.itl_ms.size(), 2u);  // three text chunks
    EXPECT_EQ(r.output_tokens, 3);
    EXPECT_TRUE(r.output_tokens_from_usage);
    EXPECT_EQ(r.prompt_tokens, 9);
    EXPECT_EQ(r.tags.at("sla"), "gold");
  }
  EXPECT_EQ(result.not_started, 0);
  const std::string request = server.requests().at(0);
  EXPECT_EQ(request.rfind("POST /v1/completions HTTP/1.1\r\n", 0), 0u);
  EXPECT_NE(request.find("x-latency-sla: gold\r\n"), std::string::npos);
  const auto body = nlohmann::json::parse(request.substr(request.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["prompt"], "Once upon a time 0");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["max_tokens"], 3);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["temperature"], 0.0);
}

TEST(LoadgenClient, Retries429AfterRetryAfter) {
  const std::string busy =
      "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Type: application/json\r\n"
      "Content-Length: 39\r\n\r\n{\"error\":{\"message\":\"queue is full\"}}\r\n";
  const std::string ok = chunked({text_event("x"), kUsage, "data: [DONE]\n\n"});
  {
    ScriptedServer server({busy, ok});
    RunResult result = run_requests(options_for(server), requests(1));
    ASSERT_EQ(result.records.size(), 1u);
    EXPECT_FALSE(result.records[0].ok);
    EXPECT_EQ(result.records[0].http_status, 429);
    EXPECT_EQ(result.records[0].rejected_429, 1);
    EXPECT_EQ(result.records[0].error, "HTTP 429: queue is full");
  }
  {
    ScriptedServer server({busy, ok});
    RunOptions o = options_for(server);
    o.retry_429 = true;
    RunResult result = run_requests(o, requests(1));
    ASSERT_EQ(result.records.size(), 1u);
    EXPECT_TRUE(result.records[0].ok) << result.records[0].error;
    EXPECT_EQ(result.records[0].rejected_429, 1);
    EXPECT_EQ(server.requests().size(), 2u);
    Report report = build_report(result.records, Slo{});
    EXPECT_EQ(report.overall.succeeded, 1u);
    EXPECT_EQ(report.overall.rejected_429, 1u);
  }
}

TEST(LoadgenClient, ErrorsBecomeTheRequestsError) {
  ScriptedServer server({chunked({text_event("a"), "data: {\"error\":{\"message\":\"boom\"}}\n\n"}),
                         chunked({text_event("a")}),
                         "HTTP/1.1 400 Bad Request\r\nContent-Length: 30\r\n\r\n"
                         "{\"error\":{\"message\":\"nope\"}}\r\n"});
  RunResult result = run_requests(options_for(server), requests(3));
  ASSERT_EQ(result.records.size(), 3u);
  EXPECT_EQ(result.records[0].error, "stream error: boom");
  EXPECT_EQ(result.records[1].error, "stream ended without [DONE]");
  EXPECT_EQ(result.records[2].error, "HTTP 400: nope");
  EXPECT_EQ(result.records[2].http_status, 400);
  for (const RequestRecord& r : result.records) EXPECT_FALSE(r.ok);
}

TEST(LoadgenClient, SessionsResendTheConversation) {
  ScriptedServer server({chunked({text_event(" Yes."), kUsage, "data: [DONE]\n\n"})});
  PreparedSession s;
  s.plan.id = "session-1-0";
  s.plan.sla = "default";
  s.history = "History.";
  s.user_lines = {"Hi", "More"};
  s.first_prompt_tokens = 5;
  RunResult result = run_sessions(options_for(server), {s});
  ASSERT_EQ(result.records.size(), 2u);
  EXPECT_EQ(result.records[0].tags.at("turn"), "first");
  EXPECT_EQ(result.records[1].tags.at("turn"), "follow_up");
  const auto sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  auto body = [](const std::string& r) {
    return nlohmann::json::parse(r.substr(r.find("\r\n\r\n") + 4));
  };
  EXPECT_EQ(body(sent[0])["prompt"], "History.\nUser: Hi\nAssistant:");
  EXPECT_EQ(body(sent[1])["prompt"], "History.\nUser: Hi\nAssistant: Yes.\nUser: More\nAssistant:");
  EXPECT_EQ(body(sent[1])["user"], "session-1-0");
  EXPECT_NE(sent[1].find("x-session-id: session-1-0\r\n"), std::string::npos);
  EXPECT_EQ(sent[1].find("x-latency-sla"), std::string::npos);  // no --sla-mix, no header
}

// With a think time a session lends its slot between turns: at concurrency 1 the second session's
// first turn runs while the first one's user "thinks"; without it each session runs its turns
// back to back.
TEST(LoadgenClient, ThinkTimeInterleavesTheTurnsOfSessions) {
  const auto order = [](double think_time_s) {
    ScriptedServer server({chunked({text_event(" Yes."), kUsage, "data: [DONE]\n\n"})});
    std::vector<PreparedSession> sessions(2);
    for (int i = 0; i < 2; ++i) {
      sessions[i].plan.id = "s" + std::to_string(i);
      sessions[i].plan.sla = "default";
      sessions[i].history = "History.";
      sessions[i].user_lines = {"Hi", "More"};
      sessions[i].first_prompt_tokens = 5;
    }
    RunOptions options = options_for(server);
    options.concurrency = 1;
    options.think_time_s = think_time_s;
    const RunResult result = run_sessions(options, sessions);
    EXPECT_EQ(result.records.size(), 4u);
    std::string users;
    for (const std::string& r : server.requests()) {
      users += nlohmann::json::parse(r.substr(r.find("\r\n\r\n") + 4))["user"].get<std::string>();
    }
    return users;
  };
  EXPECT_EQ(order(0), "s0s0s1s1");
  EXPECT_EQ(order(0.2), "s0s1s0s1");
}

}  // namespace
}  // namespace k25::loadgen
