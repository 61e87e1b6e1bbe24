// The shared KV tier's pieces without a Redis (tests/integration/redis_tier_test.cpp runs real
// ones): URL parsing, cluster key slots, the value format and its CRC, the key namespace, and the
// degrade paths: a Redis that is not there or never answers costs recomputation, never an error
// or other tokens.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "kv/redis_key_slot.h"
#include "kv/redis_store.h"
#include "kv/redis_url.h"
#include "kv/shared_kv_namespace.h"
#include "kv/shared_page_value.h"
#include "test_paths.h"

namespace k25 {
namespace {

TEST(RedisUrl, ParsesOneNodeWithUserAndDb) {
  const RedisAddress a = parse_redis_url("redis://k25@10.0.0.5:6380/3");
  ASSERT_EQ(a.nodes.size(), 1u);
  EXPECT_EQ(a.nodes[0].host, "10.0.0.5");
  EXPECT_EQ(a.nodes[0].port, 6380);
  EXPECT_EQ(a.user, "k25");
  EXPECT_EQ(a.db, 3);
  EXPECT_FALSE(a.cluster());
  const RedisAddress plain = parse_redis_url("redis://localhost:6379");
  EXPECT_EQ(plain.user, "");
  EXPECT_EQ(plain.db, 0);
}

TEST(RedisUrl, SeveralNodesAreACluster) {
  const RedisAddress a = parse_redis_url("redis://a:7000,b:7001,redis://c:7002");
  ASSERT_EQ(a.nodes.size(), 3u);
  EXPECT_TRUE(a.cluster());
  EXPECT_EQ(a.nodes[1], (RedisEndpoint{"b", 7001}));
  EXPECT_EQ(a.nodes[2], (RedisEndpoint{"c", 7002}));
}

TEST(RedisUrl, RejectsWhatItCannotUse) {
  for (const char* bad : {"", "localhost:6379", "rediss://h:6379", "redis://h", "redis://h:0",
                          "redis://h:65536", "redis://h:12x", "redis://u:pw@h:1", "redis://h:1/16",
                          "redis://h:1/0,h:2/1", "redis://a:1/2,b:2/2", "redis://:1"}) {
    EXPECT_THROW(parse_redis_url(bad), Error) << bad;
  }
}

TEST(RedisKeySlot, MatchesTheClusterSpecification) {
  EXPECT_EQ(redis_crc16("123456789"), 0x31C3);  // the spec's check value
  EXPECT_EQ(redis_key_slot("foo"), 12182);      // CLUSTER KEYSLOT foo
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("{user1000}.followers"));
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("user1000"));
  EXPECT_EQ(redis_key_slot("foo{}{bar}"), redis_crc16("foo{}{bar}") % 16384);  // empty tag
  EXPECT_EQ(redis_key_slot("foo{{bar}}zap"), redis_key_slot("{bar"));
}

TEST(RedisKeySlot, PageKeysSpreadOverTheSlots) {
  std::vector<int> per_third(3);
  for (uint64_t k = 0; k < 3000; ++k) {
    const int slot = redis_key_slot(shared_page_key("0123456789abcdef", k * 0x9e3779b97f4a7c15ull));
    ++per_third[static_cast<size_t>(slot * 3 / kRedisClusterSlots)];
  }
  for (int n : per_third) EXPECT_GT(n, 800);
}

TEST(SharedPageValue, KeepsTheBytesAndDetectsDamage) {
  std::vector<std::byte> head(24, std::byte{7}), body(100);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<std::byte>(i);
  const std::vector<std::span<const std::byte>> pieces = {head, body};
  const std::string value = encode_shared_page(42, pieces);
  ASSERT_EQ(value.size(), 124u + 4u);
  EXPECT_EQ(std::memcmp(value.data() + 24, body.data(), body.size()), 0);
  EXPECT_TRUE(shared_page_intact(42, value, 124));
  EXPECT_FALSE(shared_page_intact(43, value, 124));  // another key's page
  EXPECT_FALSE(shared_page_intact(42, value, 120));  // another page size
  EXPECT_FALSE(shared_page_intact(42, value.substr(0, 64), 124));
  std::string flipped = value;
  flipped[50] = static_cast<char>(flipped[50] ^ 1);
  EXPECT_FALSE(shared_page_intact(42, flipped, 124));
  EXPECT_EQ(shared_page_key("ns", 0x1234), "k25:kv:ns:0000000000001234");
}

TEST(SharedKvNamespace, DiffersWithTheWeightsTheKvTypeAndTheGeometry) {
  const SharedKvIdentity base{0x1111, 0x2222, 0, 32000, 288, 6};
  const std::string ns = shared_kv_namespace(base);
  EXPECT_EQ(ns.size(), 16u);
  EXPECT_EQ(ns, shared_kv_namespace(base));
  SharedKvIdentity other = base;
  other.weights_hash = 0x1112;
  EXPECT_NE(shared_kv_namespace(other), ns);
  other = base;
  other.kv_dtype = 1;
  EXPECT_NE(shared_kv_namespace(other), ns);
  other = base;
  other.geometry_seed = 0x2223;
  EXPECT_NE(shared_kv_namespace(other), ns);
  EXPECT_NE(kernel_set_identity().find('/'), std::string::npos);
}

TEST(SharedKvNamespace, WeightsHashFollowsTheContentNotThePath) {
  const std::string a = ::testing::TempDir() + "k25_weights_a",
                    b = ::testing::TempDir() + "k25_weights_b";
  std::string bytes(3 << 20, 'x');
  { std::ofstream(a, std::ios::binary) << bytes; }
  { std::ofstream(b, std::ios::binary) << bytes; }
  EXPECT_EQ(weights_content_hash(a), weights_content_hash(b));
  bytes[(2 << 20) + 5] = 'y';  // one byte in the last MiB
  { std::ofstream(b, std::ios::binary) << bytes; }
  EXPECT_NE(weights_content_hash(a), weights_content_hash(b));
  std::remove(a.c_str());
  std::remove(b.c_str());
}

// A listening socket that accepts connections (the kernel does) and never answers: a Redis
// that hangs.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A Redis that holds nothing: GET answers nil, SET OK, EXPIRE / EXISTS 0, anything else (AUTH,
// SELECT) OK. Every connection is served at once by a thread of its own.
class EmptyRedis {
 public:
  EmptyRedis() : acceptor_([this] { accept_all(); }) {}
  ~EmptyRedis() {
    shutdown(listener_.fd(), SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mutex_);
      for (int c : clients_) shutdown(c, SHUT_RDWR);
    }
    for (std::thread& t : served_) t.join();
    for (int c : clients_) close(c);
  }
  int port() const { return listener_.port(); }

 private:
  void accept_all() {
    for (;;) {
      const int c = accept(listener_.fd(), nullptr, nullptr);
      if (c < 0) return;
      std::lock_guard lock(mutex_);
      clients_.push_back(c);
      served_.emplace_back([this, c] { serve(c); });
    }
  }
  // RESP: *N\r\n then N times $L\r\n, L bytes, \r\n.
  static std::optional<std::string> take_command(std::string& in) {
    size_t at = 0;
    const auto line = [&]() -> std::optional<long> {
      const size_t end = in.find("\r\n", at);
      if (end == std::string::npos) return std::nullopt;
      const long n = std::stol(in.substr(at + 1, end - at - 1));
      at = end + 2;
      return n;
    };
    const std::optional<long> n = line();
    if (!n) return std::nullopt;
    std::string name;
    for (long i = 0; i < *n; ++i) {
      const std::optional<long> len = line();
      if (!len || in.size() < at + static_cast<size_t>(*len) + 2) return std::nullopt;
      if (i == 0) name = in.substr(at, static_cast<size_t>(*len));
      at += static_cast<size_t>(*len) + 2;
    }
    in.erase(0, at);
    return name;
  }
  void serve(int c) {
    std::string in;
    char buf[1 << 16];
    for (;;) {
      const ssize_t got = read(c, buf, sizeof(buf));
      if (got <= 0) return;
      in.append(buf, static_cast<size_t>(got));
      std::string out;
      while (std::optional<std::string> name = take_command(in)) {
        if (*name == "GET") {
          out += "$-1\r\n";
        } else if (*name == "EXPIRE" || *name == "EXISTS") {
          out += ":0\r\n";
        } else {
          out += "+OK\r\n";
        }
      }
      if (!out.empty() && write(c, out.data(), out.size()) != static_cast<ssize_t>(out.size())) {
        return;
      }
    }
  }

  SilentServer listener_;  // the listening socket; this class does the answering
  std::mutex mutex_;
  std::vector<int> clients_;
  std::vector<std::thread> served_;
  std::thread acceptor_;  // last: starts once the members above exist
};

int closed_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

RedisStoreOptions store_at(int port) {
  RedisStoreOptions o;
  o.address = parse_redis_url("redis://127.0.0.1:" + std::to_string(port));
  o.connect_timeout = std::chrono::milliseconds(100);
  o.command_timeout = std::chrono::milliseconds(100);
  o.retry_interval = std::chrono::milliseconds(5000);
  return o;
}

std::vector<RedisCompletion> wait_all(RedisStore& store, size_t n) {
  std::vector<RedisCompletion> all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    for (RedisCompletion& c : store.poll(std::chrono::milliseconds(50))) all.push_back(c);
  }
  return all;
}

TEST(RedisStore, ARedisThatIsNotThereFailsEveryRequestAndThenFailsFast) {
  RedisStore store(store_at(closed_port()));
  store.submit(RedisOp::kGet, "a");
  store.submit(RedisOp::kSet, "b", "value");
  std::vector<RedisCompletion> done = wait_all(store, 2);
  ASSERT_EQ(done.size(), 2u);
  for (const RedisCompletion& c : done) EXPECT_EQ(c.status, RedisStatus::kUnavailable);
  // Each lane (reads, writes) tried the network once.
  EXPECT_EQ(store.stats().failed_rounds, 2u);
  // Within retry_interval (5 s): answered without touching the network.
  store.submit(RedisOp::kGet, "c");
  done = wait_all(store, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, RedisStatus::kUnavailable);
  const RedisStoreStats s = store.stats();
  EXPECT_EQ(s.failed_rounds, 2u);
  EXPECT_EQ(s.errors, 3u);
  EXPECT_EQ(s.connects, 0u);
  EXPECT_FALSE(s.up);
}

TEST(RedisStore, ARedisThatNeverAnswersTimesOut) {
  SilentServer silent;
  RedisStore store(store_at(silent.port()));
  store.submit(RedisOp::kGet, "a");
  // The server accepts and never answers: only the command timeout can end the request.
  const std::vector<RedisCompletion> done = wait_all(store, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, RedisStatus::kUnavailable);
  EXPECT_EQ(store.stats().connects, 1u);
  EXPECT_EQ(store.stats().failed_rounds, 1u);
}

// The engine with a shared tier that fails: the same greedy tokens as without one.
class EngineSharedTierDegrades : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::shared_available()) {
      model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
    }
  }
  std::vector<TokenId> run(Engine& engine, const std::vector<TokenId>& prompt, int* cached) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = 12;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::vector<TokenId> out;
    EXPECT_EQ(engine
                  .submit(r,
                          [&](const GenerationEvent& e) {
                            std::lock_guard lock(m);
                            if (e.kind == GenerationEvent::Kind::Token) out.push_back(e.token);
                            if (e.kind == GenerationEvent::Kind::Finished) {
                              *cached = e.cached_tokens_shared;
                              EXPECT_EQ(e.finish_reason, FinishReason::Length) << e.error;
                              done = true;
                              cv.notify_all();
                            }
                          })
                  .status,
              SubmitStatus::Accepted);
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
    return out;
  }
  void expect_same_tokens_with_redis_at(int port) {
    const std::vector<TokenId> prompt = model_->tokenizer().encode(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in "
        "the park with her friends. One day, she saw a big red ball under a tree.",
        true, false);
    EngineOptions plain;
    plain.n_threads = 2;
    plain.prefix_cache = false;
    int cached = 0;
    std::vector<TokenId> expected;
    {
      Engine engine(*model_, plain);
      expected = run(engine, prompt, &cached);
    }
    EngineOptions o;
    o.n_threads = 2;
    o.l3_backend = EngineOptions::L3Backend::kRedis;
    o.redis.store = store_at(port);
    o.redis.read_timeout = std::chrono::milliseconds(300);
    Engine engine(*model_, o);
    ASSERT_TRUE(engine.l3_active());
    const auto start = std::chrono::steady_clock::now();
    for (int turn = 0; turn < 3; ++turn) {
      EXPECT_EQ(run(engine, prompt, &cached), expected) << "turn " << turn;
      EXPECT_EQ(cached, 0);
    }
    // Bounded by one timeout: later requests fail fast (retry_interval).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    engine.shutdown();
    EXPECT_GE(engine.stats().shared_errors.load(), 1u);
    EXPECT_EQ(engine.stats().shared_restores.load(), 0u);
  }
  std::unique_ptr<Model> model_;
};

TEST_F(EngineSharedTierDegrades, RedisDownGivesTheSameTokens) {
  K25_REQUIRE_SHARED();
  expect_same_tokens_with_redis_at(closed_port());
}

TEST_F(EngineSharedTierDegrades, RedisHangingGivesTheSameTokens) {
  K25_REQUIRE_SHARED();
  SilentServer silent;
  expect_same_tokens_with_redis_at(silent.port());
}

// A prompt whose pages Redis does not hold starts in the step it arrives in: the engine holds the
// step for the probe's answer (probe_grace) instead of leaving the prompt to the next step.
class EngineSharedTierProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::shared_available()) {
      model_ = Model::load(testing::shared_path("models/stories260K.gguf"));
    }
  }
  // A short prompt (no full page: nothing to probe) and a long one (probed), submitted together;
  // the forward calls the engine made for both.
  uint64_t forward_calls(const EngineOptions& options) {
    Engine engine(*model_, options);
    std::mutex m;
    std::condition_variable cv;
    int finished = 0;
    for (const char* text : {"Once",
                             "Once upon a time, there was a little girl named Lily. She loved to "
                             "play outside in the park with her friends. One day, she saw a big "
                             "red ball under a tree."}) {
      GenerationRequest r;
      r.prompt = model_->tokenizer().encode(text, true, false);
      r.max_tokens = 8;
      r.sampling.temperature = 0;
      r.ignore_eos = true;
      engine.submit(r, [&](const GenerationEvent& e) {
        if (e.kind != GenerationEvent::Kind::Finished) return;
        std::lock_guard lock(m);
        ++finished;
        cv.notify_all();
      });
    }
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return finished == 2; });
    lock.unlock();
    engine.shutdown();
    return engine.stats().forward_calls.load();
  }
  std::unique_ptr<Model> model_;
};

TEST_F(EngineSharedTierProbe, APromptMissingInRedisStartsInTheStepItArrivesIn) {
  K25_REQUIRE_SHARED();
  EngineOptions plain;
  plain.n_threads = 1;
  const uint64_t without_tier = forward_calls(plain);
  EmptyRedis redis;
  EngineOptions o = plain;
  o.l3_backend = EngineOptions::L3Backend::kRedis;
  o.redis.store = store_at(redis.port());
  o.redis.probe_grace = std::chrono::milliseconds(5000);  // any answer comes within it
  EXPECT_EQ(forward_calls(o), without_tier);
  // Without the grace the long prompt misses the first step, so the two finish apart.
  o.redis.probe_grace = std::chrono::milliseconds(0);
  EXPECT_GT(forward_calls(o), without_tier);
}

}  // namespace
}  // namespace k25
