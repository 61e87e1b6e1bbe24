// The bytes of one L2 page (PagePool) as the pieces DiskStore::submit_write() gathers and
// submit_read() scatters: for each layer its K rows then its V rows (page_tokens * kv_dim elements
// of the geometry's dtype each), without the blocks' alignment padding. Built only from PagePool's
// public key_block()/value_block(),
// so it does not depend on how the pool lays blocks out.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "kv/page_pool.h"

namespace k25 {

std::vector<std::span<std::byte>> l2_page_spans(const PagePool& pool, PageId page);
// The same, read-only, for DiskStore::submit_write().
std::vector<std::span<const std::byte>> l2_page_const_spans(const PagePool& pool, PageId page);
// Bytes of one page as stored in L3 (the sum of the spans' sizes).
size_t l2_page_payload_bytes(const PageGeometry& geometry);

}  // namespace k25
