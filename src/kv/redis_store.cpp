#include "kv/redis_store.h"

#include "core/error.h"
#include "kv/redis_key_slot.h"

namespace k25 {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxRedirects = 5;

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" -> the endpoint.
bool redirect_target(const std::string& error, RedisEndpoint* target) {
  const size_t space = error.rfind(' ');
  const size_t colon = error.rfind(':');
  if (space == std::string::npos || colon == std::string::npos || colon < space) return false;
  target->host = error.substr(space + 1, colon - space - 1);
  try {
    target->port = std::stoi(error.substr(colon + 1));
  } catch (const std::exception&) {
    return false;
  }
  return !target->host.empty();
}

}  // namespace

const char* to_string(RedisStatus status) {
  switch (status) {
    case RedisStatus::kOk:
      return "ok";
    case RedisStatus::kNotFound:
      return "not found";
    case RedisStatus::kServerError:
      return "server error";
    case RedisStatus::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

RedisStore::RedisStore(RedisStoreOptions options) : options_(std::move(options)) {
  if (options_.address.nodes.empty()) fail("redis: no node to connect to");
  if (options_.ttl_seconds < 1) fail("redis: ttl_seconds must be >= 1");
  for (Lane* lane : {&reads_, &writes_}) {
    lane->nodes = options_.address.nodes;
    lane->connections.resize(lane->nodes.size());
  }
  reads_.thread = std::thread([this] { run(reads_); });
  writes_.thread = std::thread([this] { run(writes_); });
}

RedisStore::~RedisStore() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  for (Lane* lane : {&reads_, &writes_}) {
    lane->work.notify_all();
    lane->thread.join();
  }
}

RedisTicket RedisStore::submit(RedisOp op, std::string key, std::string value) {
  RedisTicket ticket;
  {
    std::lock_guard lock(mutex_);
    ticket = next_ticket_++;
    lane_for(op).queue.push_back({ticket, op, std::move(key), std::move(value), Clock::now()});
    ++in_flight_;
  }
  lane_for(op).work.notify_one();
  return ticket;
}

std::vector<RedisCompletion> RedisStore::poll(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (done_.empty() && in_flight_ > 0 && timeout.count() > 0) {
    completed_.wait_for(lock, timeout, [this] { return !done_.empty() || in_flight_ == 0; });
  }
  std::vector<RedisCompletion> out;
  out.swap(done_);
  return out;
}

size_t RedisStore::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

RedisStoreStats RedisStore::stats() const {
  std::lock_guard lock(mutex_);
  RedisStoreStats s = stats_;
  if (read_latency_.count()) {
    s.read_p50_s = static_cast<double>(read_latency_.quantile(0.5)) / 1e9;
    s.read_p99_s = static_cast<double>(read_latency_.quantile(0.99)) / 1e9;
  }
  return s;
}

void RedisStore::run(Lane& lane) {
  for (;;) {
    std::vector<Request> batch;
    {
      std::unique_lock lock(mutex_);
      lane.work.wait(lock, [&] { return stop_ || !lane.queue.empty(); });
      if (lane.queue.empty()) return;  // stopping, nothing left
      batch.swap(lane.queue);
    }
    std::vector<RedisCompletion> done(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      done[i].ticket = batch[i].ticket;
      done[i].op = batch[i].op;
      done[i].key = batch[i].key;
    }
    bool reached = false;
    const bool tried = Clock::now() >= lane.retry_after;
    if (tried) {
      try {
        execute(lane, batch, done);
        reached = true;
      } catch (const RedisUnavailable& e) {
        fail_round(lane, e.what());
      }
    }
    record(batch, done, tried, reached);
  }
}

void RedisStore::record(std::vector<Request>& batch, std::vector<RedisCompletion>& done, bool tried,
                        bool reached) {
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    stats_.up = reached;
    if (tried && !reached) ++stats_.failed_rounds;
    for (size_t i = 0; i < batch.size(); ++i) {
      const RedisCompletion& d = done[i];
      ++stats_.requests;
      if (d.status == RedisStatus::kServerError || d.status == RedisStatus::kUnavailable) {
        ++stats_.errors;
      }
      if (d.op == RedisOp::kGet) {
        if (d.status == RedisStatus::kOk) ++stats_.hits;
        if (d.status == RedisStatus::kNotFound) ++stats_.misses;
        stats_.bytes_in += d.value.size();
        if (d.status == RedisStatus::kOk || d.status == RedisStatus::kNotFound) {
          read_latency_.record(static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(now - batch[i].submitted)
                  .count()));
        }
      }
      if (d.op == RedisOp::kSet && d.status == RedisStatus::kOk) {
        stats_.bytes_out += batch[i].value.size();
      }
      done_.push_back(std::move(done[i]));
    }
    in_flight_ -= batch.size();
  }
  completed_.notify_all();
}

std::vector<std::string> RedisStore::command(const Request& r) const {
  const std::string ttl = std::to_string(options_.ttl_seconds);
  switch (r.op) {
    case RedisOp::kGet:
      return {"GET", r.key};
    case RedisOp::kSet:
      return {"SET", r.key, r.value, "EX", ttl};
    case RedisOp::kExists:
      return {"EXISTS", r.key};
    case RedisOp::kExpire:
      return {"EXPIRE", r.key, ttl};
  }
  return {};
}

void RedisStore::execute(Lane& lane, std::vector<Request>& batch,
                         std::vector<RedisCompletion>& done) {
  if (options_.address.cluster() && lane.slot_owner.empty()) connect_cluster(lane);
  // One pipeline per node, in submission order within it.
  std::vector<std::vector<size_t>> by_node(lane.nodes.size());
  for (size_t i = 0; i < batch.size(); ++i) by_node[node_for(lane, batch[i].key)].push_back(i);
  for (size_t node = 0; node < by_node.size(); ++node) {
    if (by_node[node].empty()) continue;
    std::vector<std::vector<std::string>> commands;
    for (size_t i : by_node[node]) commands.push_back(command(batch[i]));
    std::vector<RedisReply> replies = connection(lane, node).pipeline(commands);
    for (size_t j = 0; j < replies.size(); ++j) {
      const size_t i = by_node[node][j];
      settle(lane, batch[i], std::move(replies[j]), done[i]);
    }
  }
}

void RedisStore::settle(Lane& lane, const Request& r, RedisReply reply, RedisCompletion& done) {
  for (int hop = 0; reply.type == RedisReply::Type::kError && hop < kMaxRedirects; ++hop) {
    const bool moved = starts_with(reply.str, "MOVED ");
    const bool ask = starts_with(reply.str, "ASK ");
    RedisEndpoint target;
    if (!(moved || ask) || !redirect_target(reply.str, &target)) break;
    {
      std::lock_guard lock(mutex_);
      ++stats_.redirects;
    }
    const size_t node = node_index(lane, target);
    if (moved && !lane.slot_owner.empty()) {
      lane.slot_owner[static_cast<size_t>(redis_key_slot(r.key))] = static_cast<int>(node);
    }
    std::vector<std::vector<std::string>> commands;
    if (ask) commands.push_back({"ASKING"});
    commands.push_back(command(r));
    reply = std::move(connection(lane, node).pipeline(commands).back());
  }
  switch (reply.type) {
    case RedisReply::Type::kString:
      done.status = RedisStatus::kOk;
      done.value = std::move(reply.str);
      break;
    case RedisReply::Type::kStatus:
      done.status = RedisStatus::kOk;
      break;
    case RedisReply::Type::kInteger:
      done.status = reply.integer > 0 ? RedisStatus::kOk : RedisStatus::kNotFound;
      break;
    case RedisReply::Type::kNil:
      done.status = RedisStatus::kNotFound;
      break;
    default:
      done.status = RedisStatus::kServerError;
      warning_.warn(
          concat("redis: ", reply.type == RedisReply::Type::kError ? reply.str : "bad reply", " (",
                 r.key, ")"));
  }
}

void RedisStore::connect_cluster(Lane& lane) {
  // Any seed that answers gives the whole map.
  std::string last_error = "no seed node";
  for (size_t seed = 0; seed < options_.address.nodes.size(); ++seed) {
    RedisReply slots;
    try {
      slots = connection(lane, node_index(lane, options_.address.nodes[seed]))
                  .command({"CLUSTER", "SLOTS"});
    } catch (const RedisUnavailable& e) {
      last_error = e.what();
      continue;
    }
    if (slots.type != RedisReply::Type::kArray || slots.elements.empty()) {
      last_error = concat("redis ", to_string(options_.address.nodes[seed]),
                          ": CLUSTER SLOTS gave no slot map (", slots.str, ")");
      continue;
    }
    std::vector<int> owner(kRedisClusterSlots,
                           static_cast<int>(node_index(lane, lane.nodes.front())));
    for (const RedisReply& range : slots.elements) {
      if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) continue;
      RedisEndpoint master;
      master.host = range.elements[2].elements[0].str;
      if (master.host.empty() || master.host == "?")
        master.host = options_.address.nodes[seed].host;
      master.port = static_cast<int>(range.elements[2].elements[1].integer);
      const int node = static_cast<int>(node_index(lane, master));
      for (int64_t s = range.elements[0].integer; s <= range.elements[1].integer; ++s) {
        if (s >= 0 && s < kRedisClusterSlots) owner[static_cast<size_t>(s)] = node;
      }
    }
    lane.slot_owner = std::move(owner);
    return;
  }
  throw RedisUnavailable(last_error);
}

size_t RedisStore::node_index(Lane& lane, const RedisEndpoint& endpoint) {
  for (size_t i = 0; i < lane.nodes.size(); ++i) {
    if (lane.nodes[i] == endpoint) return i;
  }
  lane.nodes.push_back(endpoint);
  lane.connections.emplace_back();
  return lane.nodes.size() - 1;
}

size_t RedisStore::node_for(const Lane& lane, const std::string& key) {
  if (lane.slot_owner.empty()) return 0;
  return static_cast<size_t>(lane.slot_owner[static_cast<size_t>(redis_key_slot(key))]);
}

RedisConnection& RedisStore::connection(Lane& lane, size_t node) {
  if (!lane.connections[node]) {
    lane.connections[node] = std::make_unique<RedisConnection>(
        lane.nodes[node], options_.credentials, options_.address.db, options_.connect_timeout,
        options_.command_timeout);
    std::lock_guard lock(mutex_);
    ++stats_.connects;
  }
  return *lane.connections[node];
}

void RedisStore::fail_round(Lane& lane, const std::string& why) {
  // Every connection of the lane goes (a timed-out one may hold half a reply), and the slot map
  // with them: the cluster may have changed by the time it is back.
  for (auto& c : lane.connections) c.reset();
  lane.slot_owner.clear();
  lane.retry_after = Clock::now() + options_.retry_interval;
  warning_.warn(concat(why, "; the shared KV tier is skipped (recomputing) for ",
                       options_.retry_interval.count(), " ms"));
}

}  // namespace k25
