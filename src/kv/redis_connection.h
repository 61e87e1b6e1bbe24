// One blocking connection to one Redis node (hiredis 0.14's synchronous API), used only by
// RedisStore's I/O thread: connect with a timeout, AUTH and SELECT, then pipelines (all commands
// written, then all replies read, in order). Every socket wait is bounded by the command timeout;
// a timeout or a broken socket throws RedisUnavailable and the connection is not used again.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kv/redis_url.h"

struct redisContext;

namespace k25 {

class RedisUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RedisReply {
  enum class Type : uint8_t { kString, kInteger, kNil, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

struct RedisCredentials {
  std::string user;      // empty: AUTH <password> (requirepass), else AUTH <user> <password>
  std::string password;  // empty: no AUTH
};

class RedisConnection {
 public:
  RedisConnection(const RedisEndpoint& endpoint, const RedisCredentials& credentials, int db,
                  std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends every command (argument lists, binary-safe) and returns their replies in order.
  std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);
  RedisReply command(std::vector<std::string> args);
  const RedisEndpoint& endpoint() const { return endpoint_; }

 private:
  [[noreturn]] void broken(const char* doing);
  RedisEndpoint endpoint_;
  redisContext* context_ = nullptr;
};

}  // namespace k25
