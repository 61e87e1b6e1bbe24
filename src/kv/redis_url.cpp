#include "kv/redis_url.h"

#include <charconv>

#include "core/error.h"

namespace k25 {

namespace {

int parse_number(std::string_view text, int lo, int hi, const char* what, std::string_view url) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n < lo || n > hi) {
    fail("redis_url: bad ", what, " '", text, "' in '", url, "' (", lo, "..", hi, ")");
  }
  return n;
}

}  // namespace

RedisAddress parse_redis_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  RedisAddress address;
  bool user_seen = false, db_seen = false;
  size_t start = 0;
  while (start <= url.size()) {
    size_t comma = url.find(',', start);
    if (comma == std::string_view::npos) comma = url.size();
    std::string_view item = url.substr(start, comma - start);
    start = comma + 1;
    if (item.substr(0, kScheme.size()) == kScheme) {
      item.remove_prefix(kScheme.size());
    } else if (address.nodes.empty()) {
      fail("redis_url: '", url,
           "' does not start with redis:// (rediss:// TLS is not supported "
           "by this build's hiredis 0.14)");
    }
    if (const size_t at = item.find('@'); at != std::string_view::npos) {
      const std::string user(item.substr(0, at));
      if (user.empty() || user.find(':') != std::string::npos) {
        fail("redis_url: bad user in '", url,
             "' (a password is read from flash_scheduler.redis_password_file, never the URL)");
      }
      if (user_seen && user != address.user) fail("redis_url: two users in '", url, "'");
      address.user = user;
      user_seen = true;
      item.remove_prefix(at + 1);
    }
    if (const size_t slash = item.find('/'); slash != std::string_view::npos) {
      const int db = parse_number(item.substr(slash + 1), 0, 15, "db", url);
      if (db_seen && db != address.db) fail("redis_url: two dbs in '", url, "'");
      address.db = db;
      db_seen = true;
      item = item.substr(0, slash);
    }
    const size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      fail("redis_url: '", item, "' in '", url, "' is not host:port");
    }
    RedisEndpoint node;
    node.host = std::string(item.substr(0, colon));
    node.port = parse_number(item.substr(colon + 1), 1, 65535, "port", url);
    address.nodes.push_back(std::move(node));
    if (comma == url.size()) break;
  }
  if (address.cluster() && address.db != 0) {
    fail("redis_url: a Redis Cluster has database 0 only, '", url, "' names ", address.db);
  }
  return address;
}

std::string to_string(const RedisEndpoint& endpoint) {
  return concat(endpoint.host, ':', endpoint.port);
}

}  // namespace k25
