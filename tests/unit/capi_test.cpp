// The C API (include/k25.h) on the real model: versioned structs, request ids in events, polling
// and callbacks giving the same tokens, token prompts, tokenisation, logprobs, sessions, and
// finished requests forgotten so that callers that never wait hold no memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "k25.h"
#include "test_paths.h"

namespace {

struct EngineDeleter {
  void operator()(k25_engine* e) const { k25_free(e); }
};
using EnginePtr = std::unique_ptr<k25_engine, EngineDeleter>;

std::string take_error(char* error) {
  std::string s = error ? error : "";
  k25_free_string(error);
  return s;
}

EnginePtr load(int max_queue = 256, const std::vector<const char*>& settings = {}) {
  k25_engine_options options;
  k25_engine_options_init(&options);
  options.n_threads = 2;
  options.max_queue = max_queue;
  options.settings = settings.data();
  options.n_settings = settings.size();
  char* error = nullptr;
  k25_engine* engine =
      k25_load(k25::testing::shared_path("models/stories260K.gguf").c_str(), &options, &error);
  EXPECT_NE(engine, nullptr) << take_error(error);
  return EnginePtr(engine);
}

k25_request greedy(const char* prompt, int max_tokens) {
  k25_request r;
  k25_request_init(&r);
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.temperature = 0;
  r.ignore_eos = 1;
  return r;
}

struct Collected {
  std::mutex m;
  std::vector<int32_t> tokens;
  std::vector<int64_t> ids;
  std::string text;
  int finished = 0;
  int completion_tokens = -1;
};

void collect(const k25_event* e, void* user_data) {
  auto* c = static_cast<Collected*>(user_data);
  std::lock_guard lock(c->m);
  c->ids.push_back(e->request_id);
  c->text.append(e->text, e->text_len);
  if (e->kind == K25_EVENT_TOKEN) c->tokens.push_back(e->token);
  if (e->kind == K25_EVENT_FINISHED) {
    ++c->finished;
    c->completion_tokens = e->completion_tokens;
  }
}

// The tokens of a polled request, and whether its events named it.
std::vector<int32_t> poll_tokens(k25_engine* engine, int64_t id) {
  std::vector<int32_t> tokens;
  k25_event event;
  for (;;) {
    EXPECT_EQ(k25_next_event(engine, id, &event, 30'000), 0);
    EXPECT_EQ(event.request_id, id);
    if (event.kind == K25_EVENT_FINISHED) break;
    tokens.push_back(event.token);
  }
  EXPECT_EQ(k25_next_event(engine, id, &event, 0), -1);  // taken: forgotten
  return tokens;
}

TEST(CApi, StructsOfAnotherVersionAreRefused) {
  K25_REQUIRE_SHARED();
  EXPECT_EQ(k25_abi_version(), K25_ABI_VERSION);
  k25_engine_options options;
  k25_engine_options_init(&options);
  EXPECT_EQ(options.struct_size, sizeof options);
  options.struct_size = sizeof options - 8;
  char* error = nullptr;
  EXPECT_EQ(
      k25_load(k25::testing::shared_path("models/stories260K.gguf").c_str(), &options, &error),
      nullptr);
  EXPECT_NE(take_error(error).find("struct_size"), std::string::npos);

  EnginePtr engine = load();
  k25_request request = greedy("Once", 2);
  request.struct_size = 16;
  Collected c;
  EXPECT_EQ(k25_submit(engine.get(), &request, collect, &c, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("struct_size"), std::string::npos);
}

TEST(CApi, EventsNameTheirRequestAndPollingGivesTheCallbacksTokens) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  const k25_request request = greedy("Once upon a time", 12);
  Collected c;
  char* error = nullptr;
  const int64_t id = k25_submit(engine.get(), &request, collect, &c, nullptr, &error);
  ASSERT_GT(id, 0) << take_error(error);
  ASSERT_EQ(k25_wait(engine.get(), id, -1), 0);
  EXPECT_EQ(k25_wait(engine.get(), id, 0), -1);  // waited for already
  ASSERT_EQ(c.tokens.size(), 12u);
  EXPECT_EQ(c.finished, 1);
  EXPECT_EQ(c.completion_tokens, 12);
  for (int64_t event_id : c.ids) EXPECT_EQ(event_id, id);

  const int64_t polled = k25_submit(engine.get(), &request, nullptr, nullptr, nullptr, &error);
  ASSERT_GT(polled, 0) << take_error(error);
  EXPECT_NE(polled, id);
  EXPECT_EQ(poll_tokens(engine.get(), polled), c.tokens);
  k25_event event;
  EXPECT_EQ(k25_next_event(engine.get(), id, &event, 0), -1);  // a callback request: not polled
}

TEST(CApi, TokenPromptsTokenisationAndDetokenisation) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  EXPECT_GT(k25_n_vocab(engine.get()), 0);
  EXPECT_GT(k25_context_size(engine.get()), 0);
  char* error = nullptr;
  const int64_t n = k25_tokenize(engine.get(), "Once upon a time", 1, nullptr, 0, &error);
  ASSERT_GT(n, 2) << take_error(error);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  int32_t first = -1;
  EXPECT_EQ(k25_tokenize(engine.get(), "Once upon a time", 1, &first, 1, &error), n);
  EXPECT_EQ(k25_tokenize(engine.get(), "Once upon a time", 1, tokens.data(), tokens.size(), &error),
            n);
  EXPECT_EQ(first, tokens[0]);

  std::vector<int32_t> plain(64);
  const int64_t n_plain =
      k25_tokenize(engine.get(), "Once upon a time", 0, plain.data(), plain.size(), &error);
  char* text = k25_detokenize(engine.get(), plain.data(), static_cast<size_t>(n_plain), &error);
  ASSERT_NE(text, nullptr) << take_error(error);
  EXPECT_NE(std::string(text).find("Once upon a time"), std::string::npos) << text;
  k25_free_string(text);
  const int32_t bad = k25_n_vocab(engine.get());
  EXPECT_EQ(k25_detokenize(engine.get(), &bad, 1, &error), nullptr);
  EXPECT_NE(take_error(error).find("not a token id"), std::string::npos);

  // The same prompt as text and as tokens gives the same tokens.
  Collected from_text, from_tokens;
  const k25_request by_text = greedy("Once upon a time", 8);
  k25_request by_tokens = greedy(nullptr, 8);
  by_tokens.prompt_tokens = tokens.data();
  by_tokens.n_prompt_tokens = tokens.size();
  const int64_t a = k25_submit(engine.get(), &by_text, collect, &from_text, nullptr, &error);
  const int64_t b = k25_submit(engine.get(), &by_tokens, collect, &from_tokens, nullptr, &error);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  k25_wait(engine.get(), a, -1);
  k25_wait(engine.get(), b, -1);
  EXPECT_EQ(from_tokens.tokens, from_text.tokens);
  by_tokens.prompt_tokens = &bad;
  by_tokens.n_prompt_tokens = 1;
  EXPECT_EQ(k25_submit(engine.get(), &by_tokens, collect, &from_tokens, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("prompt_tokens[0]"), std::string::npos);
}

TEST(CApi, LogprobsComeWithEachTokenMostLikelyFirst) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  k25_request request = greedy("Once upon a time", 6);
  request.top_logprobs = 3;
  request.session_id = "chat-7";
  char* error = nullptr;
  const int64_t id = k25_submit(engine.get(), &request, nullptr, nullptr, nullptr, &error);
  ASSERT_GT(id, 0) << take_error(error);
  k25_event event;
  int tokens = 0;
  for (;;) {
    ASSERT_EQ(k25_next_event(engine.get(), id, &event, 30'000), 0);
    if (event.kind == K25_EVENT_FINISHED) break;
    ++tokens;
    ASSERT_EQ(event.n_top, 3);
    EXPECT_LE(event.logprob, 0.0f);
    EXPECT_EQ(event.top_tokens[0], event.token);  // greedy: the most likely one
    EXPECT_GE(event.top_logprobs[0], event.top_logprobs[1]);
    EXPECT_GE(event.top_logprobs[1], event.top_logprobs[2]);
  }
  EXPECT_EQ(tokens, 6);
  request.top_logprobs = 21;
  EXPECT_EQ(k25_submit(engine.get(), &request, nullptr, nullptr, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("top_logprobs"), std::string::npos);
}

TEST(CApi, GrammarsAndJsonSchemasConstrainTheOutput) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  char* error = nullptr;
  const auto output = [&](k25_request request) {
    Collected c;
    const int64_t id = k25_submit(engine.get(), &request, collect, &c, nullptr, &error);
    EXPECT_GT(id, 0) << take_error(error);
    k25_wait(engine.get(), id, -1);
    return c.text;
  };
  k25_request request = greedy("Once upon a time", 16);
  request.ignore_eos = 0;
  request.grammar = "root ::= \"yes\" | \"no\"";
  const std::string answer = output(request);
  EXPECT_TRUE(answer == "yes" || answer == "no") << answer;
  request.grammar = nullptr;
  request.json_schema = R"({"type": "boolean"})";
  std::string boolean = output(request);
  // JSON allows whitespace around the value.
  boolean.erase(0, boolean.find_first_not_of(" \t\n"));
  boolean.erase(boolean.find_last_not_of(" \t\n") + 1);
  EXPECT_TRUE(boolean == "true" || boolean == "false") << boolean;

  request.grammar = "root ::= \"yes\"";
  EXPECT_EQ(k25_submit(engine.get(), &request, collect, nullptr, nullptr, &error), 0);  // both
  EXPECT_NE(take_error(error).find("not both"), std::string::npos);
  request.json_schema = nullptr;
  request.grammar = "root ::= undefined_rule";
  EXPECT_EQ(k25_submit(engine.get(), &request, collect, nullptr, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("undefined_rule"), std::string::npos);
  request.grammar = nullptr;
  request.json_schema = "{not json";
  EXPECT_EQ(k25_submit(engine.get(), &request, collect, nullptr, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("json_schema"), std::string::npos);
}

TEST(CApi, FinishedRequestsThatNobodyWaitsForAreForgotten) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load(2048);
  const k25_request request = greedy("Once", 1);
  Collected c;
  char* error = nullptr;
  std::vector<int64_t> ids;
  for (int i = 0; i < 1100; ++i) {
    ids.push_back(k25_submit(engine.get(), &request, collect, &c, nullptr, &error));
    ASSERT_GT(ids.back(), 0) << take_error(error);
  }
  ASSERT_EQ(k25_wait(engine.get(), ids.back(), -1), 0);
  // The engine finishes requests in order of arrival at equal priority; wait for all callbacks.
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard lock(c.m);
      if (c.finished == 1100) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(c.finished, 1100);
  // Only the last 1024 finished requests are remembered: the first ones are gone.
  EXPECT_EQ(k25_wait(engine.get(), ids.front(), 0), -1);
  EXPECT_EQ(k25_wait(engine.get(), ids[ids.size() - 2], 0), 0);
}

}  // namespace

namespace {

// Everything a FINISHED event says, kept past the callback.
struct Finished {
  std::mutex m;
  std::vector<int32_t> tokens;
  std::string finish_reason, matched_stop, final_plan;
  std::vector<float> embedding;
  int completion_tokens = -1;
};

void keep_finished(const k25_event* e, void* user_data) {
  auto* f = static_cast<Finished*>(user_data);
  std::lock_guard lock(f->m);
  if (e->kind == K25_EVENT_TOKEN) {
    f->tokens.push_back(e->token);
    return;
  }
  f->finish_reason = e->finish_reason;
  f->matched_stop = e->matched_stop;
  f->final_plan = e->final_plan;
  f->embedding.assign(e->embedding, e->embedding + e->n_embedding);
  f->completion_tokens = e->completion_tokens;
}

}  // namespace

TEST(CApi, SubmitSaysWhyARequestWasRefusedAndWhatFlashDecided) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  char* error = nullptr;
  k25_submit_info info;
  k25_submit_info_init(&info);
  k25_request request = greedy("Once upon a time", 4);
  Finished f;
  const int64_t id = k25_submit(engine.get(), &request, keep_finished, &f, &info, &error);
  ASSERT_GT(id, 0) << take_error(error);
  EXPECT_EQ(info.status, K25_OK);
  EXPECT_STREQ(info.domain, "default");
  EXPECT_EQ(info.flash_level, 0);  // a plain GGUF: no rule pruning unless asked for
  EXPECT_STREQ(info.plan, "full");
  EXPECT_GT(info.prompt_tokens, 2);
  k25_free_string(info.plan);
  ASSERT_EQ(k25_wait(engine.get(), id, -1), 0);
  EXPECT_EQ(f.final_plan, "full");

  k25_submit_info_init(&info);
  request.domain_hint = "legal";
  EXPECT_EQ(k25_submit(engine.get(), &request, keep_finished, &f, &info, &error), 0);
  EXPECT_EQ(info.status, K25_UNKNOWN_DOMAIN);
  EXPECT_NE(take_error(error).find("gate not found"), std::string::npos);
  EXPECT_EQ(k25_knows_domain(engine.get(), "legal"), 0);
  EXPECT_EQ(k25_knows_domain(engine.get(), "default"), 1);

  request = greedy("Once", 4);
  request.max_tokens = 0;
  EXPECT_EQ(k25_submit(engine.get(), &request, keep_finished, &f, &info, &error), 0);
  EXPECT_EQ(info.status, K25_INVALID_REQUEST);
  take_error(error);
  request = greedy("Once", 4);
  request.speculative = "sometimes";
  EXPECT_EQ(k25_submit(engine.get(), &request, keep_finished, &f, &info, &error), 0);
  EXPECT_EQ(info.status, K25_INVALID_REQUEST);
  EXPECT_NE(take_error(error).find("speculative"), std::string::npos);

  // A queue of one: the second waiting request is refused as QUEUE_FULL.
  EnginePtr small = load(1, {"engine.debug_step_delay_ms=200", "flash_scheduler.max_batch_size=1"});
  request = greedy("Once upon a time", 8);
  std::vector<int64_t> ids;
  k25_status last = K25_OK;
  for (int i = 0; i < 4 && last == K25_OK; ++i) {
    k25_submit_info_init(&info);
    const int64_t submitted = k25_submit(small.get(), &request, nullptr, nullptr, &info, &error);
    last = info.status;
    if (submitted > 0) {
      ids.push_back(submitted);
      k25_free_string(info.plan);
    }
  }
  EXPECT_EQ(last, K25_QUEUE_FULL);
  take_error(error);
  EXPECT_GE(k25_n_active(small.get()), 1);
  k25_cancel_all(small.get());
  for (int64_t queued : ids) {
    k25_event event;
    while (k25_next_event(small.get(), queued, &event, 30'000) == 0 &&
           event.kind != K25_EVENT_FINISHED) {
    }
    EXPECT_STREQ(event.finish_reason, "cancelled");
  }
  // The engine forgets a finished request just after its last event: soon, not at once.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (k25_n_active(small.get()) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(k25_n_active(small.get()), 0);
}

TEST(CApi, SettingsConfigureTheEngineAndFlash) {
  K25_REQUIRE_SHARED();
  char* error = nullptr;
  k25_engine_options options;
  k25_engine_options_init(&options);
  const std::string model = k25::testing::shared_path("models/stories260K.gguf");
  for (const char* bad : {"api_server.port=8080", "flash_scheduler.kv_cache_dtype=f8",
                          "engine.threads=two", "flash_scheduler.l2_page_tokens=24", "threads"}) {
    options.settings = &bad;
    options.n_settings = 1;
    EXPECT_EQ(k25_load(model.c_str(), &options, &error), nullptr) << bad;
    const std::string message = take_error(error);
    EXPECT_NE(message.find("setting"), std::string::npos) << bad << ": " << message;
  }

  // The Level 1 rule switched on: a short request runs without the last block's FFN
  // (stories260K has 5 blocks), and the engine reports the plan it ran under.
  EnginePtr engine =
      load(256, {"flash_scheduler.rule_pruning=on", "flash_scheduler.kv_cache_dtype=f16",
                 "flash_scheduler.adaptive_pruning=false"});
  k25_submit_info info;
  k25_submit_info_init(&info);
  k25_request request = greedy("Once upon a time", 6);
  Finished f;
  const int64_t id = k25_submit(engine.get(), &request, keep_finished, &f, &info, &error);
  ASSERT_GT(id, 0) << take_error(error);
  EXPECT_EQ(info.flash_level, 1);
  EXPECT_STREQ(info.plan, "ffn-off[4]");
  EXPECT_GT(info.compute_saved, 0);
  k25_free_string(info.plan);
  ASSERT_EQ(k25_wait(engine.get(), id, -1), 0);
  EXPECT_EQ(f.final_plan, "ffn-off[4]");
  EXPECT_EQ(f.tokens.size(), 6u);

  // "pruning": "off" for one request: the full model.
  request.pruning = 0;
  k25_submit_info_init(&info);
  const int64_t full = k25_submit(engine.get(), &request, keep_finished, &f, &info, &error);
  ASSERT_GT(full, 0) << take_error(error);
  EXPECT_EQ(info.flash_level, 0);
  EXPECT_STREQ(info.plan, "full");
  k25_free_string(info.plan);
  k25_wait(engine.get(), full, -1);

  char* metrics = k25_metrics(engine.get());
  EXPECT_NE(std::string(metrics).find("flash_requests_by_level_total{level=\"1\"} 1"),
            std::string::npos)
      << metrics;
  k25_free_string(metrics);

  k25_model_info model_info;
  model_info.struct_size = sizeof model_info;
  ASSERT_EQ(k25_get_model_info(engine.get(), &model_info), 0);
  EXPECT_STREQ(model_info.architecture, "llama");
  EXPECT_EQ(model_info.n_layers, 5);
  EXPECT_EQ(model_info.dim, 64);
  EXPECT_EQ(model_info.n_vocab, k25_n_vocab(engine.get()));
  EXPECT_NE(std::string(model_info.isa), "");
  model_info.struct_size = 8;
  EXPECT_EQ(k25_get_model_info(engine.get(), &model_info), -1);
}

TEST(CApi, StopTokensLogitBiasEmbeddingsAndProgress) {
  K25_REQUIRE_SHARED();
  EnginePtr engine = load();
  char* error = nullptr;
  k25_request request = greedy("Once upon a time", 8);
  Finished plain;
  const int64_t first = k25_submit(engine.get(), &request, keep_finished, &plain, nullptr, &error);
  ASSERT_GT(first, 0) << take_error(error);
  k25_wait(engine.get(), first, -1);
  ASSERT_EQ(plain.tokens.size(), 8u);
  EXPECT_EQ(k25_progress(engine.get(), first), -1);  // waited for: forgotten

  // The third greedy token as a stop token ends the output before it (as an end-of-generation
  // token does: it is not part of the output).
  Finished stopped;
  request.stop_tokens = &plain.tokens[2];
  request.n_stop_tokens = 1;
  request.ignore_eos = 0;
  const int64_t id = k25_submit(engine.get(), &request, nullptr, nullptr, nullptr, &error);
  ASSERT_GT(id, 0) << take_error(error);
  k25_event event;
  std::vector<int32_t> tokens;
  while (k25_next_event(engine.get(), id, &event, 30'000) == 0 && event.kind == K25_EVENT_TOKEN) {
    tokens.push_back(event.token);
    EXPECT_GT(k25_progress(engine.get(), id), 0);
  }
  EXPECT_STREQ(event.finish_reason, "stop");
  const auto stop_at = std::find(plain.tokens.begin(), plain.tokens.end(), plain.tokens[2]);
  EXPECT_EQ(tokens, std::vector<int32_t>(plain.tokens.begin(), stop_at));

  // Banning the first greedy token changes the first token.
  request = greedy("Once upon a time", 2);
  const float ban = -100;
  request.logit_bias_tokens = &plain.tokens[0];
  request.logit_bias_values = &ban;
  request.n_logit_bias = 1;
  Finished banned;
  const int64_t b = k25_submit(engine.get(), &request, keep_finished, &banned, nullptr, &error);
  ASSERT_GT(b, 0) << take_error(error);
  k25_wait(engine.get(), b, -1);
  ASSERT_FALSE(banned.tokens.empty());
  EXPECT_NE(banned.tokens[0], plain.tokens[0]);

  // An embedding request: no tokens, a unit vector of the model's width.
  request = greedy("Once upon a time", 1);
  request.embedding = "mean";
  Finished embedded;
  const int64_t e = k25_submit(engine.get(), &request, keep_finished, &embedded, nullptr, &error);
  ASSERT_GT(e, 0) << take_error(error);
  k25_wait(engine.get(), e, -1);
  EXPECT_TRUE(embedded.tokens.empty());
  ASSERT_EQ(embedded.embedding.size(), 64u);
  double norm = 0;
  for (float x : embedded.embedding) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-4);
  request.embedding = "max";
  EXPECT_EQ(k25_submit(engine.get(), &request, keep_finished, &embedded, nullptr, &error), 0);
  EXPECT_NE(take_error(error).find("embedding"), std::string::npos);
}
