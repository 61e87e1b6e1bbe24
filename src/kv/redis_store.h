// The shared KV tier's client (docs/kv-cache.md "Shared tier on Redis"): GET/SET/EXISTS/EXPIRE
// submitted by the engine thread, which never waits on a socket. An I/O thread of our own takes
// everything submitted since its last round and sends it as one pipeline per Redis node with
// hiredis's synchronous API; the engine collects completions with poll(). There are two such
// lanes, each a thread with its own connections: SETs on one, GET/EXISTS/EXPIRE on the other, so
// that a probe (a sequence waits for it) never queues behind a finished turn's megabytes of SETs,
// neither in our queue nor on the socket.
//
// Why an I/O thread and not hiredis's async API: the async API needs an event-loop library
// (libevent, libev, ...) through an adapter, and the engine has no event loop; a thread that
// blocks on a socket with bounded timeouts gives the same pipelining (one round trip per batch),
// and the engine thread only touches a mutex-guarded queue.
//
// Redis Cluster (more than one node in the URL): CLUSTER SLOTS gives the slot -> node map at
// connect; each command goes to its key's slot owner (redis_key_slot); a MOVED reply updates the
// map and the command is resent there, an ASK reply resends it once with ASKING before it.
//
// Failures never throw: a node that is down, slow (command timeout), full (an OOM error reply) or
// refusing completes the requests with kUnavailable / kServerError, counted in errors, with a
// warning at most every 10 s. After a connection failure the store fails fast (no socket wait)
// for retry_interval before it tries to connect again, so a dead Redis costs the engine nothing.
//
// Thread-safety: submit(), poll() and stats() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/latency_histogram.h"
#include "core/rate_limited_warning.h"
#include "kv/redis_connection.h"
#include "kv/redis_url.h"

namespace k25 {

using RedisTicket = uint64_t;

struct RedisStoreOptions {
  RedisAddress address;
  RedisCredentials credentials;
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds command_timeout{200};  // per socket wait of a pipeline
  std::chrono::milliseconds retry_interval{1000};  // fail fast this long after a failure
  int ttl_seconds = 3600;                          // SET ... EX and EXPIRE
};

enum class RedisOp : uint8_t { kGet, kSet, kExists, kExpire };
enum class RedisStatus : uint8_t {
  kOk,
  kNotFound,     // GET: nil; EXISTS / EXPIRE: 0
  kServerError,  // an error reply (OOM when full, CLUSTERDOWN, too many redirects, ...)
  kUnavailable,  // no connection, a timeout, or failing fast after one
};
const char* to_string(RedisStatus status);

struct RedisCompletion {
  RedisTicket ticket = 0;
  RedisOp op = RedisOp::kGet;
  std::string key;
  RedisStatus status = RedisStatus::kUnavailable;
  std::string value;  // GET's value
};

struct RedisStoreStats {
  uint64_t requests = 0;
  uint64_t hits = 0, misses = 0;          // GETs that found a value / found none
  uint64_t bytes_in = 0, bytes_out = 0;   // values read / written
  uint64_t errors = 0;                    // kServerError + kUnavailable completions
  uint64_t redirects = 0;                 // MOVED / ASK followed
  uint64_t connects = 0;                  // connections opened
  uint64_t failed_rounds = 0;             // pipelines that tried and could not reach Redis
  double read_p50_s = 0, read_p99_s = 0;  // GET: submission to completion
  bool up = false;                        // the last round reached Redis
};

class RedisStore {
 public:
  explicit RedisStore(RedisStoreOptions options);  // starts the I/O thread; connects lazily
  ~RedisStore();  // lets the submitted requests finish (bounded by the timeouts)
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  RedisTicket submit(RedisOp op, std::string key, std::string value = {});
  // Completions so far; when none is ready but requests are in flight, waits up to `timeout`.
  std::vector<RedisCompletion> poll(std::chrono::milliseconds timeout = {});
  size_t in_flight() const;
  RedisStoreStats stats() const;
  const RedisStoreOptions& options() const { return options_; }

 private:
  struct Request {
    RedisTicket ticket;
    RedisOp op;
    std::string key, value;
    std::chrono::steady_clock::time_point submitted;
  };
  // An I/O thread and what only it touches, except `queue` (guarded by mutex_).
  struct Lane {
    std::vector<RedisEndpoint> nodes;
    std::vector<std::unique_ptr<RedisConnection>> connections;  // by node, null until needed
    std::vector<int> slot_owner;                                // cluster: node by slot
    std::chrono::steady_clock::time_point retry_after{};
    std::vector<Request> queue;
    std::condition_variable work;
    std::thread thread;
  };
  Lane& lane_for(RedisOp op) { return op == RedisOp::kSet ? writes_ : reads_; }
  void run(Lane& lane);
  void execute(Lane& lane, std::vector<Request>& batch, std::vector<RedisCompletion>& done);
  void connect_cluster(Lane& lane);
  RedisConnection& connection(Lane& lane, size_t node);
  static size_t node_for(const Lane& lane, const std::string& key);
  static size_t node_index(Lane& lane, const RedisEndpoint& endpoint);
  std::vector<std::string> command(const Request& r) const;
  // Applies `reply` to `done`; a MOVED / ASK reply is followed (resent) first.
  void settle(Lane& lane, const Request& r, RedisReply reply, RedisCompletion& done);
  void fail_round(Lane& lane, const std::string& why);
  void record(std::vector<Request>& batch, std::vector<RedisCompletion>& done, bool tried,
              bool reached);

  RedisStoreOptions options_;
  RateLimitedWarning warning_;

  mutable std::mutex mutex_;
  std::condition_variable completed_;
  bool stop_ = false;
  RedisTicket next_ticket_ = 1;
  std::vector<RedisCompletion> done_;
  size_t in_flight_ = 0;
  RedisStoreStats stats_;
  LatencyHistogram read_latency_;
  Lane reads_, writes_;  // last: their threads start once everything above exists
};

}  // namespace k25
