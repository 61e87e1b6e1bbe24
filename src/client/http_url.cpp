#include "client/http_url.h"

#include "core/error.h"

namespace k25::client {

HttpUrl HttpUrl::parse(const std::string& url, const std::string& what) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) fail(what, ": '", url, "' must start with http://");
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string::npos) out.prefix = rest.substr(slash);
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  const size_t colon = authority.rfind(':');
  // A colon inside brackets belongs to an IPv6 address, not to a port.
  if (colon != std::string::npos && authority.find(']', colon) == std::string::npos) {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  } else {
    out.host = authority;
    out.port = "80";
  }
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty()) fail(what, ": '", url, "' has no host");
  if (out.port.empty() || out.port.size() > 5 ||
      out.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(out.port) > 65535) {
    fail(what, ": '", url, "' has an invalid port");
  }
  return out;
}

std::string HttpUrl::target(const std::string& path) const {
  const std::string v1 = "/v1";
  if (prefix.ends_with(v1) && path.starts_with(v1 + "/")) return prefix + path.substr(v1.size());
  return prefix + path;
}

std::string HttpUrl::host_header() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + port;
}

}  // namespace k25::client
