#include "kv/redis_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "core/error.h"

namespace k25 {

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply convert(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

RedisConnection::RedisConnection(const RedisEndpoint& endpoint, const RedisCredentials& credentials,
                                 int db, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds command_timeout)
    : endpoint_(endpoint) {
  context_ =
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, to_timeval(connect_timeout));
  if (context_ == nullptr) throw RedisUnavailable("redis: out of memory connecting");
  if (context_->err) broken("connecting");
  if (redisSetTimeout(context_, to_timeval(command_timeout)) != REDIS_OK) broken("setting timeout");
  redisEnableKeepAlive(context_);
  auto check = [&](std::vector<std::string> args, const char* what) {
    const RedisReply reply = command(std::move(args));
    if (reply.type == RedisReply::Type::kError) {
      const std::string message =
          concat("redis ", to_string(endpoint_), ": ", what, ": ", reply.str);
      redisFree(context_);
      context_ = nullptr;
      throw RedisUnavailable(message);
    }
  };
  if (!credentials.password.empty()) {
    if (credentials.user.empty()) {
      check({"AUTH", credentials.password}, "AUTH");
    } else {
      check({"AUTH", credentials.user, credentials.password}, "AUTH");
    }
  }
  if (db != 0) check({"SELECT", std::to_string(db)}, "SELECT");
}

RedisConnection::~RedisConnection() {
  if (context_) redisFree(context_);
}

void RedisConnection::broken(const char* doing) {
  std::string message = concat("redis ", to_string(endpoint_), ": ", doing, ": ",
                               context_ && context_->errstr[0] ? context_->errstr : "failed");
  if (context_) redisFree(context_);
  context_ = nullptr;
  throw RedisUnavailable(message);
}

std::vector<RedisReply> RedisConnection::pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  if (context_ == nullptr) throw RedisUnavailable("redis: connection closed");
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& args : commands) {
    argv.clear();
    lengths.clear();
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      broken("queueing a command");
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) broken("reading a reply");
    replies.push_back(convert(*static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return replies;
}

RedisReply RedisConnection::command(std::vector<std::string> args) {
  std::vector<std::vector<std::string>> one;
  one.push_back(std::move(args));
  return std::move(pipeline(one).front());
}

}  // namespace k25
