#include "kv/redis_prefix_tier.h"

#include <cstring>

#include "kv/l2_page_spans.h"
#include "kv/prefix_page_header.h"
#include "kv/shared_page_value.h"

namespace k25 {

namespace {

constexpr size_t kMaxKnownKeys = size_t{1} << 20;            // forgotten all at once beyond this
constexpr auto kFetchedLifetime = std::chrono::seconds(10);  // values read and never restored

}  // namespace

RedisPrefixTier::RedisPrefixTier(RedisTierOptions options, PagePool& pool)
    : options_(std::move(options)),
      pool_(pool),
      page_bytes_(prefix_page_header_bytes(pool.geometry().page_tokens) +
                  l2_page_payload_bytes(pool.geometry())),
      store_(std::make_unique<RedisStore>(options_.store)) {}

RedisPrefixTier::~RedisPrefixTier() {
  limit_in_flight(0);
}

void RedisPrefixTier::warn(const char* what, uint64_t count) {
  warning_.warn(concat("shared KV tier: ", what, "; recomputing (", count, " pages so far)"));
}

void RedisPrefixTier::write(const CachedPage& page) {
  if (known_.count(page.key) || writing_.count(page.key)) return;
  if (write_bytes_ + page_bytes_ > options_.max_write_bytes) {
    ++stats_.writes_skipped;  // Redis is slower than the pages come: those stay local
    return;
  }
  const std::vector<std::byte> head = prefix_page_header(page, pool_.geometry().page_tokens);
  std::vector<std::span<const std::byte>> pieces = {head};
  for (const auto& span : l2_page_const_spans(pool_, page.page)) pieces.push_back(span);
  std::string value = encode_shared_page(page.key, pieces);
  const size_t bytes = value.size();
  const RedisTicket ticket = store_->submit(
      RedisOp::kSet, shared_page_key(options_.kv_namespace, page.key), std::move(value));
  pending_[ticket] = {page.key, 0, bytes};
  writing_.insert(page.key);
  write_bytes_ += bytes;
}

TierProbeId RedisPrefixTier::probe(const uint64_t* keys, size_t n_keys) {
  const TierProbeId id = next_probe_++;
  size_t asked = 0;
  for (size_t i = 0; i < n_keys; ++i) {
    if (fetched_.count(keys[i]) || asked_.count(keys[i])) continue;
    const RedisTicket ticket =
        store_->submit(RedisOp::kGet, shared_page_key(options_.kv_namespace, keys[i]));
    pending_[ticket] = {keys[i], id, 0};
    asked_.insert(keys[i]);
    ++asked;
  }
  if (asked) probes_[id] = asked;
  return id;
}

L3RestoreId RedisPrefixTier::begin_restore(std::vector<CachedPage> chain) {
  const int page_tokens = pool_.geometry().page_tokens;
  const size_t head_bytes = prefix_page_header_bytes(page_tokens);
  size_t restored = 0;
  for (const CachedPage& page : chain) {
    auto it = fetched_.find(page.key);
    if (it == fetched_.end()) break;
    const std::string& value = it->second.value;
    const std::vector<std::byte> expected = prefix_page_header(page, page_tokens);
    const bool same_prefix = std::memcmp(value.data(), expected.data(), head_bytes) == 0;
    if (same_prefix) {
      size_t at = head_bytes;
      pool_.populate(page.page);  // one call maps the OS pages the copies would fault in one by one
      for (const auto& span : l2_page_spans(pool_, page.page)) {
        std::memcpy(span.data(), value.data() + at, span.size());
        at += span.size();
      }
      ++restored;
      ++stats_.restores;
      known_.insert(page.key);
      // Read again: keep it past its TTL (fire and forget, like the writes).
      pending_[store_->submit(RedisOp::kExpire, shared_page_key(options_.kv_namespace, page.key))] =
          {page.key, 0, 0};
    } else {
      ++stats_.corrupt;
      warn("a page holds another prefix", stats_.corrupt);
    }
    fetched_bytes_ -= value.size();
    fetched_.erase(it);
    if (!same_prefix) break;
  }
  const L3RestoreId id = next_restore_++;
  restored_[id] = restored;
  return id;
}

RestoredPages RedisPrefixTier::end_restore(L3RestoreId id, std::vector<bool>* kept) {
  auto it = restored_.find(id);
  const size_t n = it == restored_.end() ? 0 : it->second;
  if (it != restored_.end()) restored_.erase(it);
  kept->clear();  // nothing is read after begin_restore(): every page may be freed at once
  return {n, n};
}

void RedisPrefixTier::poll(std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  for (RedisCompletion& done : store_->poll(timeout)) {
    auto it = pending_.find(done.ticket);
    if (it == pending_.end()) continue;
    const Pending p = it->second;
    pending_.erase(it);
    switch (done.op) {
      case RedisOp::kGet: {
        asked_.erase(p.key);
        if (done.status == RedisStatus::kOk) {
          if (!shared_page_intact(p.key, done.value, page_bytes_)) {
            ++stats_.corrupt;
            warn("a value failed its length or CRC check", stats_.corrupt);
          } else if (fetched_bytes_ + done.value.size() <= options_.max_fetched_bytes) {
            fetched_bytes_ += done.value.size();
            fetched_[p.key] = {std::move(done.value), now};
          }
        }
        auto probe = probes_.find(p.probe);
        if (probe != probes_.end() && --probe->second == 0) probes_.erase(probe);
        break;
      }
      case RedisOp::kSet:
        writing_.erase(p.key);
        write_bytes_ -= p.bytes;
        if (done.status == RedisStatus::kOk) {
          ++stats_.writes;
          if (known_.size() >= kMaxKnownKeys) known_.clear();
          known_.insert(p.key);
        }
        break;
      case RedisOp::kExpire:
        if (done.status == RedisStatus::kNotFound) known_.erase(p.key);  // evicted meanwhile
        break;
      case RedisOp::kExists:
        break;
    }
  }
  // Values of probes whose sequence never restored them (cancelled, or found in L2 after all).
  for (auto it = fetched_.begin(); it != fetched_.end();) {
    if (now - it->second.at > kFetchedLifetime) {
      fetched_bytes_ -= it->second.value.size();
      it = fetched_.erase(it);
    } else {
      ++it;
    }
  }
}

void RedisPrefixTier::limit_in_flight(size_t max_in_flight) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store_->in_flight() > max_in_flight && std::chrono::steady_clock::now() < deadline) {
    poll(std::chrono::milliseconds(100));
  }
  poll();
}

SharedTierStats RedisPrefixTier::shared_stats() const {
  const RedisStoreStats s = store_->stats();
  SharedTierStats out = stats_;
  out.hits = s.hits;
  out.misses = s.misses;
  out.bytes_in = s.bytes_in;
  out.bytes_out = s.bytes_out;
  out.errors = s.errors;
  out.read_p50_s = s.read_p50_s;
  out.read_p99_s = s.read_p99_s;
  out.up = s.up;
  out.writes_in_flight = writing_.size();
  return out;
}

}  // namespace k25
