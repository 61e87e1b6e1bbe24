// A server's base URL as k25's HTTP client takes it (k25-bench --url, k25-verify, the fallback
// upstream): http://HOST[:PORT][/PREFIX]. The prefix goes before every path; OpenAI base URLs
// usually end in "/v1", which the API paths carry too, so that part is shared, not doubled.
#pragma once

#include <string>

namespace k25::client {

struct HttpUrl {
  std::string host;    // without brackets for IPv6
  std::string port;    // "80" when the URL has none
  std::string prefix;  // path before the route, without a trailing '/', e.g. "" or "/v1"

  // Throws k25::Error naming `what` (the key or flag) unless the URL is http:// with a host and a
  // numeric port (https is not supported: put a TLS proxy in front).
  static HttpUrl parse(const std::string& url, const std::string& what);

  // The request target for a route: prefix + path, where a prefix ending in "/v1" and a path
  // starting with "/v1/" share that part ("http://h/v1" + "/v1/completions" -> "/v1/completions").
  std::string target(const std::string& path) const;
  // The Host header: host:port, an IPv6 host in brackets.
  std::string host_header() const;
};

}  // namespace k25::client
