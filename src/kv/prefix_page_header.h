// The header in front of a prefix-cache page's K/V bytes in every lower tier (the disk's L3 and
// the shared Redis tier store the same format): a format tag, the parent page's key and the
// page's token ids. A restore compares it with what the chain expects, so a page is only used
// for exactly the prefix it was computed for, whatever the store's own key says.
#pragma once

#include <cstddef>
#include <vector>

#include "kv/prefix_cache.h"

namespace k25 {

size_t prefix_page_header_bytes(int page_tokens);
std::vector<std::byte> prefix_page_header(const CachedPage& page, int page_tokens);

}  // namespace k25
