// The shared KV tier's address (docs/kv-cache.md "Shared tier on Redis"):
// `redis://[user@]host:port[/db]`, several comma-separated for the seed nodes of a Redis Cluster
// (`redis://a:7000,b:7001` or `redis://a:7000,redis://b:7001`; the user and db apply to all and
// may be given once). The password is never part of the URL: it comes from
// flash_scheduler.redis_password_file, so it stays out of command lines and logs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k25 {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  bool operator==(const RedisEndpoint&) const = default;
};

struct RedisAddress {
  std::vector<RedisEndpoint> nodes;  // at least one; more than one means a cluster
  std::string user;                  // empty: AUTH with the password only (or no AUTH)
  int db = 0;                        // SELECT after connecting (a cluster has db 0 only)
  bool cluster() const { return nodes.size() > 1; }
};

// Throws k25::Error naming the problem ("redis_url: ...") for anything else.
RedisAddress parse_redis_url(std::string_view url);

// "host:port", for messages and metrics.
std::string to_string(const RedisEndpoint& endpoint);

}  // namespace k25
