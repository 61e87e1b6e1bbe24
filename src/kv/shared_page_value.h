// How a prefix-cache page is stored in the shared (Redis) tier: the key is
// "k25:kv:<namespace>:<chain key as 16 hex digits>", the value is the same bytes as an L3 page
// (prefix_page_header, then the L2 page's K/V bytes) followed by the same checksum the disk
// store keeps in its index: CRC-32C of the chain key's 8 bytes and everything before it, as a
// little-endian u32. A value of the wrong length or with a bad CRC is never used.
//
// <namespace> (shared_kv_namespace.h) names everything that makes KV rows bitwise what they are,
// so replicas that could disagree on a single bit never read each other's pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace k25 {

std::string shared_page_key(std::string_view kv_namespace, uint64_t chain_key);
// The value of `chain_key` holding the concatenation of `pieces`.
std::string encode_shared_page(uint64_t chain_key,
                               std::span<const std::span<const std::byte>> pieces);
// Whether `value` is a page of `chain_key` with `bytes` bytes (header and K/V) and a good CRC.
bool shared_page_intact(uint64_t chain_key, std::string_view value, size_t bytes);

}  // namespace k25
