#include "server/static_route.h"

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "server/api_error.h"
#include "server/static_files.h"

namespace k25 {

namespace {

ApiError static_error(int status, std::string message, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = status == 404 ? "not_found_error" : "invalid_request_error";
  e.code = std::move(code);
  return e;
}

}  // namespace

net::awaitable<void> serve_static(HttpExchange& ex, std::string_view url_path) {
  const HttpRequest& req = ex.request();
  if (req.method() != http::verb::get) {
    throw ApiException(
        static_error(405, concat(url_path, " accepts GET only"), "method_not_allowed"));
  }
  const StaticFile* file = find_static_file(url_path);
  if (!file) {
    throw ApiException(static_error(404, concat("no file ", url_path), "not_found"));
  }
  // The names carry no version, so the browser asks again each time (no-cache) and gets a 304
  // while the binary is the same. The policy keeps the page off any other origin.
  std::vector<std::pair<std::string, std::string>> headers;
  headers.emplace_back("ETag", std::string(file->etag));
  headers.emplace_back("Cache-Control", "no-cache");
  headers.emplace_back("X-Content-Type-Options", "nosniff");
  headers.emplace_back("Content-Security-Policy",
                       "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  auto match = req.find(http::field::if_none_match);
  if (match != req.end() &&
      std::string_view(match->value().data(), match->value().size()) == file->etag) {
    co_await ex.send(304, static_content_type(file->name), std::string(), headers);
    co_return;
  }
  co_await ex.send(200, static_content_type(file->name), std::string(file->content), headers);
}

}  // namespace k25
