// Serves the chat page's embedded files (server/static_files.h) on GET "/" and "/ui/...".
#pragma once

#include <string_view>

#include "server/http_server.h"

namespace k25 {

// Answers one request for a static path: 200 with the file, 304 when If-None-Match names its
// current ETag. Throws ApiException: 404 for a name that is not embedded, 405 for a method other
// than GET.
net::awaitable<void> serve_static(HttpExchange& ex, std::string_view url_path);

}  // namespace k25
