// The shared KV tier on real Redis processes (flash_scheduler.l3_backend: redis,
// docs/kv-cache.md "Shared tier on Redis"): two k25 replicas share one Redis, so a session's
// turn 2 on the replica that did not see turn 1 finds its history there; a Redis killed mid-run,
// a corrupted value, or a replica with another model file or KV type costs recomputation, never
// a wrong answer; a 3-node Redis Cluster works the same; HAProxy with session affinity in front
// of two replicas survives one replica SIGKILLed mid-run with the history found in Redis.
// redis-server, redis-cli and haproxy must be installed (scripts/setup.sh): the tests fail
// without them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "haproxy_process.h"
#include "kv/redis_store.h"
#include "redis_process.h"
#include "server_process.h"

namespace k25::testing {
namespace {

using nlohmann::json;

std::string model_path(const std::string& name = "stories260K.gguf") {
  return std::string(K25_SHARED_DIR) + "/models/" + name;
}

std::vector<std::string> replica_args(const std::string& redis_url,
                                      const std::vector<std::string>& more = {},
                                      const std::string& model = model_path()) {
  std::vector<std::string> args = {"--config",  std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                   "--model",   model,
                                   "--threads", "1"};
  if (!redis_url.empty()) {
    args.insert(args.end(), {"--l3-backend", "redis", "--redis-url", redis_url});
  }
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

struct Turn {
  int status = 0;
  std::string text;
  int prompt_tokens = 0, completion_tokens = 0, cached = 0, cached_redis = 0;
  std::string error;
};

Turn complete(int port, const std::string& prompt, const std::string& session,
              int max_tokens = 24) {
  const json body = {
      {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"user", session}};
  const HttpResult r =
      http_call(port, "POST", "/v1/completions", body.dump(), {{"x-session-id", session}});
  Turn t;
  t.status = r.status;
  if (r.status != 200) {
    t.error = r.body;
    return t;
  }
  const json j = json::parse(r.body);
  t.text = j["choices"][0]["text"];
  const json& usage = j["usage"];
  t.prompt_tokens = usage["prompt_tokens"];
  t.completion_tokens = usage["completion_tokens"];
  t.cached = usage["prompt_tokens_details"]["cached_tokens"];
  t.cached_redis = usage["prompt_tokens_details"]["cached_tokens_by_tier"]["redis"];
  return t;
}

std::string story(int i) {
  return "Once upon a time, in a town by the sea, there lived a girl named Mia number " +
         std::to_string(i) +
         ". Every morning she walked to the harbour to watch the boats come in. One day a "
         "small blue boat came in with a dog on it, and the dog looked at Mia and barked. Mia "
         "was happy. She ran to her mom and said, \"Mom, there is a dog on the boat!\" Her mom "
         "smiled and said, \"Let us go and see the dog.\" They went to the boat together and "
         "the dog wagged its tail. The man on the boat said the dog was lost and needed a home.";
}
const std::string kTurn2 = " Mia smiled and said hello to the dog.";

// Waits until replica `port` has written a finished turn's pages to Redis: its
// k25_shared_kv_writes_total has passed `writes_before` and no SET is in flight. The write-through
// is asynchronous, and on a loaded machine a turn 2 sent to another replica at once could come
// first and find nothing (docs/kv-cache.md, "Write-through"). The counters are published at the
// engine's steps (at least once a second when idle).
void wait_for_write_through(int port, double writes_before) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline &&
         (metric(port, "k25_shared_kv_writes_total") <= writes_before ||
          metric(port, "k25_shared_kv_writes_in_flight") != 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A turn on replica `port` whose pages are in Redis when it returns (see wait_for_write_through).
Turn complete_and_share(int port, const std::string& prompt, const std::string& session) {
  const double before = metric(port, "k25_shared_kv_writes_total");
  const Turn t = complete(port, prompt, session);
  if (t.status == 200) wait_for_write_through(port, before);
  return t;
}

// Turn 2's prompt: turn 1's prompt, its answer, and the next user line.
std::string follow_up(const std::string& prompt, const Turn& first) {
  return prompt + first.text + kTurn2;
}

// What a replica that never saw the session answers (no shared tier, no earlier turn).
std::string lone_answer(const std::string& prompt, const std::vector<std::string>& more = {}) {
  ServerProcess lone(replica_args("", more));
  return complete(lone.port(), prompt, "lone").text;
}

void expect_turn2_found_in_redis(const Turn& first, const Turn& second) {
  ASSERT_EQ(second.status, 200) << second.error;
  const int history = first.prompt_tokens + first.completion_tokens;
  EXPECT_GE(second.cached, history * 9 / 10) << "history " << history;
  EXPECT_EQ(second.cached_redis, second.cached);  // replica B had none of it in RAM
}

TEST(SharedTier, Turn2OnAnotherReplicaFindsTheHistoryInRedis) {
  RedisProcess redis;
  ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  const std::string prompt = story(1);
  const Turn first = complete_and_share(a.port(), prompt, "s1");
  ASSERT_EQ(first.status, 200) << first.error;
  // Written through at the end of turn 1: in Redis a moment later, whichever replica asks.
  const std::string turn2 = follow_up(prompt, first);
  const Turn second = complete(b.port(), turn2, "s1");
  expect_turn2_found_in_redis(first, second);
  EXPECT_EQ(second.text, lone_answer(turn2));
  EXPECT_GT(metric(b.port(), "k25_shared_kv_hits_total"), 0);
  EXPECT_EQ(metric(b.port(), "k25_cached_tokens_total{tier=\"redis\"}"), second.cached);
  EXPECT_GT(metric(b.port(), "k25_shared_kv_bytes_in_total"), 0);
  // The engine publishes its counters at each step: one more request on A shows its writes.
  EXPECT_EQ(complete(a.port(), "Hello", "z").status, 200);
  EXPECT_GT(metric(a.port(), "k25_shared_kv_bytes_out_total"), 0);
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_errors_total"), 0);
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_up"), 1);
}

// The store's reads have a lane of their own: a GET submitted after a turn's worth of SETs
// (64 MiB here) is answered before those are all written, where one pipeline would have put it
// behind them.
TEST(SharedTier, AReadIsAnsweredWhileLargeWritesAreStillGoing) {
  RedisProcess redis;
  RedisStoreOptions o;
  o.address = parse_redis_url(redis.url());
  o.command_timeout = std::chrono::milliseconds(5000);
  RedisStore store(o);
  constexpr int kWrites = 64;
  for (int i = 0; i < kWrites; ++i) {
    store.submit(RedisOp::kSet, "w" + std::to_string(i), std::string(size_t{1} << 20, 'x'));
  }
  const RedisTicket read = store.submit(RedisOp::kGet, "w0-absent");
  int writes_before_read = -1, writes = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((writes < kWrites || writes_before_read < 0) &&
         std::chrono::steady_clock::now() < deadline) {
    for (const RedisCompletion& c : store.poll(std::chrono::milliseconds(50))) {
      if (c.ticket == read) {
        EXPECT_EQ(c.status, RedisStatus::kNotFound);
        writes_before_read = writes;
      } else {
        EXPECT_EQ(c.status, RedisStatus::kOk);
        ++writes;
      }
    }
  }
  EXPECT_EQ(writes, kWrites);
  ASSERT_GE(writes_before_read, 0);
  EXPECT_LT(writes_before_read, kWrites);
}

TEST(SharedTier, RedisKilledMidRunEveryRequestIsAnsweredCorrectly) {
  auto redis = std::make_unique<RedisProcess>();
  ServerProcess a(replica_args(redis->url(), {"--redis-timeout-ms", "100"})),
      b(replica_args(redis->url(), {"--redis-timeout-ms", "100"}));
  constexpr int kSessions = 4;
  std::vector<std::string> turn2(kSessions), expected(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    const Turn first = complete_and_share(a.port(), story(s), "k" + std::to_string(s));
    ASSERT_EQ(first.status, 200) << first.error;
    turn2[s] = follow_up(story(s), first);
  }
  {
    ServerProcess lone(replica_args(""));
    for (int s = 0; s < kSessions; ++s) expected[s] = complete(lone.port(), turn2[s], "x").text;
  }
  // Half the sessions' turn 2 with Redis up, then Redis dies, then the rest.
  for (int s = 0; s < kSessions; ++s) {
    if (s == kSessions / 2) redis->kill_now();
    const Turn second = complete(b.port(), turn2[s], "k" + std::to_string(s));
    ASSERT_EQ(second.status, 200) << second.error;
    EXPECT_EQ(second.text, expected[s]) << "session " << s;
    if (s < kSessions / 2) {
      EXPECT_GT(second.cached_redis, 0) << "session " << s;
    } else {
      EXPECT_EQ(second.cached_redis, 0) << "session " << s;
    }
  }
  // New sessions while Redis is down: answered, and the failure is counted.
  EXPECT_EQ(complete(a.port(), story(9), "k9").status, 200);
  EXPECT_GT(metric(b.port(), "k25_shared_kv_errors_total"), 0);
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_up"), 0);
}

TEST(SharedTier, ACorruptedValueIsDetectedAndRecomputed) {
  RedisProcess redis;
  ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  const Turn first = complete_and_share(a.port(), story(2), "c");
  ASSERT_EQ(first.status, 200);
  const std::string turn2 = follow_up(story(2), first);
  // One byte changed in the K/V bytes of every stored page (offset past the header).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string keys;
  while ((keys = redis.cli("--scan --pattern 'k25:kv:*'")).empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no page was written";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::istringstream lines(keys);
  std::string key;
  int damaged = 0;
  while (std::getline(lines, key)) {
    if (key.empty()) continue;
    EXPECT_EQ(redis.cli("SETRANGE " + key + " 200 Z").find("ERR"), std::string::npos);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  const Turn second = complete(b.port(), turn2, "c");
  ASSERT_EQ(second.status, 200) << second.error;
  EXPECT_EQ(second.cached_redis, 0);
  EXPECT_EQ(second.text, lone_answer(turn2));
  EXPECT_GT(metric(b.port(), "k25_shared_kv_corrupt_total"), 0);
}

TEST(SharedTier, AReplicaWithAnotherModelFileOrKvTypeNeverReadsThePages) {
  RedisProcess redis;
  // The same model with one weight byte changed (its last tensor's data ends the file).
  const std::string changed = redis.dir() + "/changed.gguf";
  std::filesystem::copy_file(model_path(), changed);
  std::filesystem::permissions(changed, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  {
    std::fstream f(changed, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-3, std::ios::end);
    c = static_cast<char>(c ^ 0x01);
    f.write(&c, 1);
  }
  ServerProcess a(replica_args(redis.url()));
  const Turn first = complete_and_share(a.port(), story(3), "m");
  ASSERT_EQ(first.status, 200);
  const std::string turn2 = follow_up(story(3), first);
  {
    ServerProcess other_model(replica_args(redis.url(), {}, changed));
    const Turn t = complete(other_model.port(), turn2, "m");
    ASSERT_EQ(t.status, 200) << t.error;
    EXPECT_EQ(t.cached_redis, 0);
    EXPECT_EQ(metric(other_model.port(), "k25_shared_kv_hits_total"), 0);
  }
  {
    ServerProcess other_dtype(replica_args(redis.url(), {"--kv-cache-dtype", "f32"}));
    const Turn t = complete(other_dtype.port(), turn2, "m");
    ASSERT_EQ(t.status, 200) << t.error;
    EXPECT_EQ(t.cached_redis, 0);
    EXPECT_EQ(metric(other_dtype.port(), "k25_shared_kv_hits_total"), 0);
    EXPECT_EQ(t.text, lone_answer(turn2, {"--kv-cache-dtype", "f32"}));
  }
  // The same model file under another path shares: the namespace is the content's.
  const std::string copy = redis.dir() + "/copy.gguf";
  std::filesystem::copy_file(model_path(), copy);
  ServerProcess same_content(replica_args(redis.url(), {}, copy));
  expect_turn2_found_in_redis(first, complete(same_content.port(), turn2, "m"));
}

TEST(SharedTier, ARedisClusterOfThreeNodesWorksTheSame) {
  RedisCluster cluster(3);
  ServerProcess a(replica_args(cluster.url())), b(replica_args(cluster.url()));
  constexpr int kSessions = 3;
  for (int s = 0; s < kSessions; ++s) {
    const std::string prompt = story(20 + s);
    const Turn first = complete_and_share(a.port(), prompt, "cl" + std::to_string(s));
    ASSERT_EQ(first.status, 200) << first.error;
    const std::string turn2 = follow_up(prompt, first);
    const Turn second = complete(b.port(), turn2, "cl" + std::to_string(s));
    if (s == 0) {
      expect_turn2_found_in_redis(first, second);
    } else {
      // The stories' first pages are the same: those are in B's RAM from session 0.
      ASSERT_EQ(second.status, 200) << second.error;
      EXPECT_GE(second.cached, (first.prompt_tokens + first.completion_tokens) * 9 / 10);
      EXPECT_GT(second.cached_redis, second.cached / 2);
    }
    if (s == 0) {
      EXPECT_EQ(second.text, lone_answer(turn2));
    }
  }
  // Per-page keys: every shard holds pages.
  for (const auto& node : cluster.nodes()) {
    EXPECT_GT(std::stoi(node->cli("DBSIZE")), 0) << node->endpoint();
  }
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_errors_total"), 0);
}

// A file holding `password` (flash_scheduler.redis_password_file), removed with the test.
class PasswordFile {
 public:
  explicit PasswordFile(const std::string& password)
      : path_(std::filesystem::temp_directory_path() /
              ("k25-redis-pw-" + std::to_string(getpid()) + "-" + password)) {
    std::ofstream(path_) << password << "\n";
  }
  ~PasswordFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Turn 1 on A, turn 2 on B through a Redis that needs credentials.
void expect_shared_with_credentials(const std::string& url, const std::string& password_file,
                                    const std::string& session) {
  const std::vector<std::string> auth = {"--redis-password-file", password_file};
  ServerProcess a(replica_args(url, auth)), b(replica_args(url, auth));
  const std::string prompt = story(30);
  const Turn first = complete_and_share(a.port(), prompt, session);
  ASSERT_EQ(first.status, 200) << first.error;
  expect_turn2_found_in_redis(first, complete(b.port(), follow_up(prompt, first), session));
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_errors_total"), 0);
}

TEST(SharedTier, AuthWithThePasswordOfTheDefaultUser) {
  RedisProcess redis({"--requirepass", "default-secret"}, "-a default-secret --no-auth-warning");
  ASSERT_NE(redis.cli_as("", "SET probe x").find("NOAUTH"), std::string::npos);
  const PasswordFile password("default-secret");
  expect_shared_with_credentials(redis.url(), password.path(), "auth-default");
}

TEST(SharedTier, AuthAsAnAclUserNamedInTheUrl) {
  // The default user may only PING: every page command needs the k25 user's AUTH.
  RedisProcess redis({"--user", "default", "on", "nopass", "-@all", "+ping", "--user", "k25", "on",
                      ">acl-secret", "~*", "+@all"},
                     "--user k25 --pass acl-secret --no-auth-warning");
  ASSERT_NE(redis.cli_as("", "SET probe x").find("NOPERM"), std::string::npos);
  const PasswordFile password("acl-secret");
  const std::string url = "redis://k25@" + redis.endpoint();
  expect_shared_with_credentials(url, password.path(), "auth-acl");
  EXPECT_GT(std::stoi(redis.cli("DBSIZE")), 0);
}

TEST(SharedTier, AWrongPasswordDegradesToRecomputationAndIsCounted) {
  RedisProcess redis({"--requirepass", "right-secret"}, "-a right-secret --no-auth-warning");
  const PasswordFile wrong("wrong-secret");
  ServerProcess a(replica_args(redis.url(), {"--redis-password-file", wrong.path()}));
  const std::string prompt = story(31);
  const Turn first = complete(a.port(), prompt, "auth-wrong");
  ASSERT_EQ(first.status, 200) << first.error;
  const std::string turn2 = follow_up(prompt, first);
  const Turn second = complete(a.port(), turn2, "auth-wrong");
  ASSERT_EQ(second.status, 200) << second.error;
  EXPECT_EQ(second.cached_redis, 0);
  EXPECT_EQ(second.text, lone_answer(turn2));
  EXPECT_GT(metric(a.port(), "k25_shared_kv_errors_total"), 0);
  EXPECT_EQ(metric(a.port(), "k25_shared_kv_up"), 0);
  EXPECT_NE(a.log().find("AUTH"), std::string::npos) << a.log();
}

// The lines of a redis-cli answer.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

TEST(SharedTier, AClusterReshardedUnderTheReplicasIsFollowedThroughAskAndMoved) {
  RedisCluster cluster(3);  // redis-cli --cluster create wants three masters
  const RedisProcess& from = *cluster.nodes()[0];
  const RedisProcess& to = *cluster.nodes()[1];
  ServerProcess a(replica_args(cluster.url())), b(replica_args(cluster.url()));
  // Two sessions' turn 1 on A, and one request on B so that it holds the slot map from now.
  std::vector<std::string> turn2;
  for (int s = 0; s < 2; ++s) {
    const Turn first = complete_and_share(a.port(), story(40 + s), "rs" + std::to_string(s));
    ASSERT_EQ(first.status, 200) << first.error;
    turn2.push_back(follow_up(story(40 + s), first));
  }
  ASSERT_EQ(complete(b.port(), "Hello", "z").status, 200);
  const std::string from_id = lines_of(from.cli("CLUSTER MYID")).at(0);
  const std::string to_id = lines_of(to.cli("CLUSTER MYID")).at(0);
  // Every slot of `from` that holds pages starts migrating to `to`; half its keys move now.
  std::map<std::string, std::vector<std::string>> keys_by_slot;
  for (const std::string& key : lines_of(from.cli("--scan"))) {
    keys_by_slot[lines_of(from.cli("CLUSTER KEYSLOT " + key)).at(0)].push_back(key);
  }
  ASSERT_FALSE(keys_by_slot.empty());
  for (const auto& [slot, keys] : keys_by_slot) {
    ASSERT_NE(to.cli("CLUSTER SETSLOT " + slot + " IMPORTING " + from_id).find("OK"),
              std::string::npos);
    ASSERT_NE(from.cli("CLUSTER SETSLOT " + slot + " MIGRATING " + to_id).find("OK"),
              std::string::npos);
  }
  auto migrate = [&](const std::string& key) {
    ASSERT_NE(from.cli("MIGRATE 127.0.0.1 " + std::to_string(to.port()) + " " + key + " 0 5000")
                  .find("OK"),
              std::string::npos);
  };
  size_t moved = 0;
  for (const auto& [slot, keys] : keys_by_slot) {
    for (size_t i = 0; i < keys.size(); i += 2, ++moved) migrate(keys[i]);
  }
  ASSERT_GT(moved, 0u);
  // Mid-migration: the keys still on `from` are read there, the moved ones through ASK.
  const Turn mid = complete(b.port(), turn2[0], "rs0");
  ASSERT_EQ(mid.status, 200) << mid.error;
  EXPECT_GE(mid.cached, mid.prompt_tokens * 8 / 10);
  EXPECT_EQ(mid.cached_redis, mid.cached);
  EXPECT_EQ(mid.text, lone_answer(turn2[0]));
  // The migration ends: every slot belongs to `to`, and B's slot map is stale (MOVED).
  for (const auto& [slot, keys] : keys_by_slot) {
    for (size_t i = 1; i < keys.size(); i += 2) migrate(keys[i]);
    for (const RedisProcess* node : {&from, &to}) {
      ASSERT_NE(node->cli("CLUSTER SETSLOT " + slot + " NODE " + to_id).find("OK"),
                std::string::npos);
    }
  }
  for (const auto& [slot, keys] : keys_by_slot) {
    ASSERT_EQ(lines_of(from.cli("CLUSTER COUNTKEYSINSLOT " + slot)).at(0), "0") << slot;
  }
  const Turn after = complete(b.port(), turn2[1], "rs1");
  ASSERT_EQ(after.status, 200) << after.error;
  EXPECT_GE(after.cached, after.prompt_tokens * 8 / 10);
  EXPECT_GT(after.cached_redis, 0);
  EXPECT_EQ(after.text, lone_answer(turn2[1]));
  EXPECT_EQ(metric(b.port(), "k25_shared_kv_errors_total"), 0);
}

TEST(SharedTier, AFullRedisDegradesToRecomputation) {
  // maxmemory with noeviction, filled past it: every SET is refused (OOM).
  RedisProcess redis(
      {"--maxmemory", "2mb", "--maxmemory-policy", "noeviction", "--enable-debug-command", "yes"});
  ASSERT_NE(redis.cli("DEBUG POPULATE 40000 filler 100").find("OK"), std::string::npos);
  ASSERT_NE(redis.cli("SET probe x").find("OOM"), std::string::npos) << redis.cli("INFO memory");
  ServerProcess a(replica_args(redis.url())), b(replica_args(redis.url()));
  const Turn first = complete(a.port(), story(4), "f");
  ASSERT_EQ(first.status, 200) << first.error;
  const std::string turn2 = follow_up(story(4), first);
  const Turn second = complete(b.port(), turn2, "f");
  ASSERT_EQ(second.status, 200) << second.error;
  EXPECT_EQ(second.cached_redis, 0);
  EXPECT_EQ(second.text, lone_answer(turn2));
  EXPECT_EQ(complete(a.port(), "Hello", "z").status, 200);  // a step publishes the counters
  EXPECT_GT(metric(a.port(), "k25_shared_kv_errors_total"), 0);
}

TEST(SharedTier, DiskInFrontOfRedisRestoresFromEither) {
  RedisProcess redis;
  const auto stacked = [&](const std::string& name) {
    const std::string dir = redis.dir() + "/" + name;
    std::filesystem::create_directories(dir);
    std::vector<std::string> args =
        replica_args("", {"--l3-backend", "disk+redis", "--redis-url", redis.url(), "--l3-enabled",
                          "true", "--l3-device", dir});
    return args;
  };
  ServerProcess a(stacked("a"));
  const Turn first = complete_and_share(a.port(), story(5), "d");
  ASSERT_EQ(first.status, 200) << first.error;
  const std::string turn2 = follow_up(story(5), first);
  {
    ServerProcess b(stacked("b"));  // an empty disk tier: the pages come from Redis
    expect_turn2_found_in_redis(first, complete(b.port(), turn2, "d"));
    b.signal(SIGTERM);  // a clean stop saves the disk tier's index
    EXPECT_EQ(b.wait_exit(), 0);
  }
  // B's shutdown wrote its cached pages to its disk: restarted, it finds them there.
  redis.kill_now();
  ServerProcess b_again(stacked("b"));
  const Turn again = complete(b_again.port(), turn2, "d");
  ASSERT_EQ(again.status, 200) << again.error;
  EXPECT_GE(again.cached, (first.prompt_tokens + first.completion_tokens) * 9 / 10);
  EXPECT_EQ(again.cached_redis, 0);
  EXPECT_EQ(again.text, lone_answer(turn2));
}

TEST(SharedTierHaproxy, AReplicaKilledMidRunItsSessionsContinueWithTheirHistoryFromRedis) {
  RedisProcess redis;
  // Each step sleeps 10 ms so that turn-2 requests are in flight on the replica when it dies.
  const std::vector<std::string> slow = {"--debug-step-delay-ms", "10"};
  auto a = std::make_unique<ServerProcess>(replica_args(redis.url(), slow));
  ServerProcess b(replica_args(redis.url(), slow));
  HaproxyProcess proxy("haproxy-sessions.cfg", a->port(), b.port());
  proxy.wait_ready();
  const int port = proxy.port();
  constexpr int kSessions = 8;
  std::vector<Turn> first(kSessions);
  std::vector<std::string> turn2(kSessions), expected(kSessions);
  for (int s = 0; s < kSessions; ++s) {
    first[s] = complete(port, story(40 + s), "h" + std::to_string(s));
    ASSERT_EQ(first[s].status, 200) << first[s].error;
    turn2[s] = follow_up(story(40 + s), first[s]);
  }
  // Sessions hashed to replica A: the ones whose turn 1 shows in A's request count.
  const double a_requests = metric(a->port(), "k25_prompt_tokens_total");
  ASSERT_GT(a_requests, 0) << "consistent hashing put no session on replica 1";
  {
    ServerProcess lone(replica_args(""));
    for (int s = 0; s < kSessions; ++s) expected[s] = complete(lone.port(), turn2[s], "x").text;
  }
  std::vector<Turn> second(kSessions);
  std::vector<std::thread> clients;
  for (int s = 0; s < kSessions; ++s) {
    clients.emplace_back([&, s] {
      try {
        second[s] = complete(port, turn2[s], "h" + std::to_string(s));
      } catch (const std::exception& e) {
        second[s].error = e.what();
      }
    });
  }
  // SIGKILL replica A while turn 2 is under way there: once A's engine runs one of them (each
  // takes 24 steps of 10 ms or more), not after a guessed delay.
  const auto running_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool a_busy = false;
  while (!(a_busy = metric(a->port(), "k25_requests_running") >= 1) &&
         std::chrono::steady_clock::now() < running_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(a_busy) << "no turn 2 reached replica A";  // the clients still need joining
  a->signal(SIGKILL);
  for (std::thread& t : clients) t.join();
  int from_redis = 0;
  for (int s = 0; s < kSessions; ++s) {
    ASSERT_EQ(second[s].status, 200) << "session " << s << ": " << second[s].error << "\n"
                                     << proxy.log();
    EXPECT_EQ(second[s].text, expected[s]) << "session " << s;
    const int history = first[s].prompt_tokens + first[s].completion_tokens;
    EXPECT_GE(second[s].cached, history * 9 / 10) << "session " << s;
    from_redis += second[s].cached_redis > 0 ? 1 : 0;
  }
  // A's sessions continued on B, which found their history in Redis.
  EXPECT_GT(from_redis, 0);
  EXPECT_GT(metric(b.port(), "k25_cached_tokens_total{tier=\"redis\"}"), 0);
}

}  // namespace
}  // namespace k25::testing
