// flash_scheduler.redis_url (kv/redis_url.h): any text either parses into at least one node with
// a port in 1..65535 and a non-empty host, a db in 0..15 (0 for a cluster), or is a k25::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "kv/redis_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const k25::RedisAddress a =
        k25::parse_redis_url(std::string_view(reinterpret_cast<const char*>(data), size));
    if (a.nodes.empty() || a.db < 0 || a.db > 15 || (a.cluster() && a.db != 0)) __builtin_trap();
    for (const k25::RedisEndpoint& n : a.nodes) {
      if (n.host.empty() || n.port < 1 || n.port > 65535) __builtin_trap();
    }
  } catch (const k25::Error&) {
  }
  return 0;
}
