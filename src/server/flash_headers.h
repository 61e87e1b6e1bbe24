// R-FP1: the request-fingerprint headers (x-prompt-length, x-response-length, x-latency-sla,
// x-domain-hint). They are hints: parsed strictly (a malformed value is a 400 naming the header),
// defaults documented in docs/server.md.
#pragma once

#include <functional>
#include <optional>
#include <string_view>

#include "flash/request_hints.h"

namespace k25 {

// Largest value accepted in the length headers.
inline constexpr int kMaxHeaderLength = 100'000'000;

// `header(name)` returns a header's value when present (name in lower case). Throws
// ApiException (400, param = the header name) on a malformed value. Does not check whether the
// domain is known (see check_domain_known).
FlashHints parse_flash_headers(
    const std::function<std::optional<std::string_view>(std::string_view)>& header);

}  // namespace k25
