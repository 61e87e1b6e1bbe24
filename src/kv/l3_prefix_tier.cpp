#include "kv/l3_prefix_tier.h"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "kv/l2_page_spans.h"
#include "util/error.h"

namespace k25 {

namespace {

constexpr uint64_t kHeaderTag = 0x3130584650353260ull;  // "`25PFX01": the page format

bool power_of_two(uint64_t n) {
  return n != 0 && (n & (n - 1)) == 0;
}

}  // namespace

L3PrefixTier::L3PrefixTier(DiskStoreOptions options, PagePool& pool)
    : pool_(pool), store_(std::make_unique<DiskStore>(options)) {
  const uint64_t page_size = options.page_size;  // validated by the store
  const uint64_t bytes = header_bytes() + l2_page_payload_bytes(pool_.geometry());
  slots_per_page_ = (bytes + page_size - 1) / page_size;
  for (L3Key key : store_->keys()) age_.push_back(key);  // pages of earlier runs go first
}

size_t L3PrefixTier::header_bytes() const {
  return 2 * sizeof(uint64_t) + static_cast<size_t>(pool_.geometry().page_tokens) * sizeof(int32_t);
}

void L3PrefixTier::make_room() {
  // Oldest written first; keys erased meanwhile (bad pages) are skipped by erase()'s false.
  DiskStoreStats s = store_->stats();
  while (s.slots_total - s.slots_used < slots_per_page_ && !age_.empty()) {
    if (store_->erase(age_.front())) ++stats_.dropped;
    age_.pop_front();
    s = store_->stats();
  }
}

L3PrefixTier::~L3PrefixTier() {
  // Writes copied their bytes at submission; a bounded drain lets them land before the
  // store saves its index (the store's destructor drains again, also bounded).
  store_->drain(std::chrono::seconds(10));
  for (const L3Completion& done : store_->poll()) account(done);
  // Before late_reads_ goes: a read still in flight is copied into its buffers when it completes.
  store_.reset();
}

std::vector<std::byte> L3PrefixTier::header(const CachedPage& page) const {
  const size_t n_tokens = static_cast<size_t>(pool_.geometry().page_tokens);
  std::vector<std::byte> bytes(header_bytes());
  std::memcpy(bytes.data(), &kHeaderTag, sizeof(uint64_t));
  std::memcpy(bytes.data() + sizeof(uint64_t), &page.parent, sizeof(uint64_t));
  std::memcpy(bytes.data() + 2 * sizeof(uint64_t), page.tokens, n_tokens * sizeof(int32_t));
  return bytes;
}

void L3PrefixTier::spill(const CachedPage& page) {
  if (store_->contains(page.key) || writing_.count(page.key)) return;
  make_room();
  age_.push_back(page.key);
  const std::vector<std::byte> head = header(page);
  std::vector<std::span<const std::byte>> pieces = {head};
  for (const auto& span : l2_page_const_spans(pool_, page.page)) pieces.push_back(span);
  store_->submit_write(page.key, pieces);  // copies the bytes now; the outcome comes to poll()
  writing_.insert(page.key);
}

size_t L3PrefixTier::restore_chain(const std::vector<CachedPage>& chain, std::vector<bool>* kept) {
  kept->assign(chain.size(), false);
  struct Read {
    L3Ticket ticket = 0;
    std::vector<std::byte> expected, found;
  };
  // All reads go to the device at once (it serves them in parallel), then are taken in order.
  std::vector<Read> reads(chain.size());  // sized once: the header buffers do not move
  size_t submitted = 0;
  for (; submitted < chain.size() && store_->contains(chain[submitted].key); ++submitted) {
    Read& r = reads[submitted];
    r.expected = header(chain[submitted]);
    r.found.resize(r.expected.size());
    std::vector<std::span<std::byte>> pieces = {r.found};
    for (const auto& span : l2_page_spans(pool_, chain[submitted].page)) pieces.push_back(span);
    r.ticket = store_->submit_read(chain[submitted].key, std::move(pieces));
  }
  const auto deadline = std::chrono::steady_clock::now() + kReadTimeout;
  size_t restored = 0;
  for (size_t i = 0; i < submitted; ++i) {
    Read& r = reads[i];
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const L3Completion done = store_->wait(r.ticket, std::max(left, std::chrono::milliseconds(0)));
    const char* problem = nullptr;
    if (done.status == L3Status::kTimedOut) {
      // The read still lands in the L2 page and the header buffer when it completes: both stay
      // (moving the vector keeps its buffer) until poll() sees the completion.
      late_reads_.emplace(r.ticket, LateRead{chain[i].page, std::move(r.found)});
      (*kept)[i] = true;
      problem = "timed out";
    } else if (!done.ok()) {
      problem = to_string(done.status);  // the store has warned about checksum and I/O errors
    } else if (r.found != r.expected) {
      problem = "holds another prefix";
    }
    if (!problem) {
      // Usable only while every page before it was (a chain is used from its start).
      if (restored == i) {
        ++restored;
        ++stats_.restores;
      }
      continue;
    }
    // Forgotten, so that the page is not tried again (it is recomputed and may be spilled anew).
    store_->erase(chain[i].key);
    ++stats_.restore_failures;
    if (power_of_two(stats_.restore_failures)) {
      std::cerr << "warning: L3 prefix page " << chain[i].key << ": " << problem
                << "; recomputing it (" << stats_.restore_failures << " pages so far)\n";
    }
  }
  return restored;
}

void L3PrefixTier::account(const L3Completion& done) {
  if (!done.is_write) {
    auto it = late_reads_.find(done.ticket);
    if (it != late_reads_.end()) {
      pool_.free(it->second.page);
      late_reads_.erase(it);
    }
    return;
  }
  writing_.erase(done.key);
  if (done.ok()) {
    ++stats_.spills;
  } else {
    ++stats_.spill_failures;  // the store warned (no space, I/O error); the page is recomputed
  }
}

void L3PrefixTier::poll() {
  for (const L3Completion& done : store_->poll()) account(done);
}

void L3PrefixTier::limit_in_flight(size_t max_in_flight) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store_->in_flight() > max_in_flight && std::chrono::steady_clock::now() < deadline) {
    for (const L3Completion& done : store_->poll(std::chrono::milliseconds(100))) account(done);
  }
}

double L3PrefixTier::read_latency_p99_s() const {
  const LatencyHistogram& h = store_->read_latency();
  return h.count() ? static_cast<double>(h.quantile(0.99)) / 1e9 : 0.0;
}

}  // namespace k25
