// The L2 KV tier (SPEC R-KV1): a KvCache whose memory is pages from a bounded PagePool.
// Each sequence has a page table (page ids, one per page_tokens positions); reserve() takes
// pages on demand, clear() gives them back at once. Nothing is set aside for the context
// length, and the pool never grows past its byte budget: when it is full, reserve() throws
// k25::Error("KV pool exhausted: ...") so the caller can preempt or queue; can_reserve() asks
// first without committing anything.
//
// Pages are reference counted (PagePool): adopt() maps pages that another holder (the prefix
// cache) keeps into a sequence's table, and clear() drops the sequence's references, so a page
// shared with the prefix cache stays. A PageReclaimer (the prefix cache) is asked for its
// unused pages before reserve() reports the pool exhausted, and pages_available() counts them.
//
// Thread-safety: reserve(), adopt() and clear() from one thread. key_run()/value_rows() only read
// the page tables, so the attention workers may call them concurrently while no reserve()/clear()
// runs.
#pragma once

#include <cstddef>
#include <vector>

#include "kv/page_pool.h"
#include "kv/page_reclaimer.h"
#include "model/kv_cache.h"

namespace k25 {

class PagedKvCache final : public KvCache {
 public:
  static constexpr int kDefaultPageTokens = 16;  // see docs/kv-cache.md for the measurement

  // Throws k25::Error on a non-positive shape.
  PagedKvCache(int n_layers, int kv_dim, int max_positions, size_t budget_bytes,
               int page_tokens = kDefaultPageTokens, KvDtype dtype = KvDtype::kF32);

  KvDtype dtype() const override { return pool_.geometry().dtype; }
  void reserve(int seq, int n_positions) override;
  void clear(int seq) override;
  // Keys in tiles of key_tile_width(page_tokens) positions inside each page.
  KeyRun key_run(int seq, int layer, int pos) override;
  std::byte* value_rows(int seq, int layer, int pos, int* n_contiguous) override;

  // Whether reserve(seq, n_positions) would succeed now (reclaiming pages if needed).
  bool can_reserve(int seq, int n_positions) const;
  // Makes `pages` (allocated pool pages, in position order from position 0) the page table of
  // `seq`, adding a reference to each. `seq` must hold no page yet; throws k25::Error otherwise
  // or when the pages hold more positions than the context.
  void adopt(int seq, const std::vector<PageId>& pages);
  // Gives back the pages of `seq` past those that positions [0, n_positions) need (a rolled
  // back speculative draft); a no-op when it holds no more.
  void truncate(int seq, int n_positions);
  // Pages `seq` still needs to hold n_positions, or -1 when the request is invalid.
  long pages_missing(int seq, int n_positions) const;
  // Pages reserve() may still take: free ones plus what the reclaimer can give back.
  size_t pages_available() const;
  // The holder of idle pages to reclaim from when the pool is short (null: none). Not owned.
  void set_reclaimer(PageReclaimer* reclaimer) { reclaimer_ = reclaimer; }
  // The page ids of `seq`, in position order (empty for an unknown sequence).
  const std::vector<PageId>& page_table(int seq) const;

  size_t bytes_used() const { return pool_.pages_used() * pool_.page_bytes(); }
  size_t bytes_budget() const { return pool_.budget_bytes(); }
  size_t pages_used() const { return pool_.pages_used(); }
  const PagePool& pool() const { return pool_; }
  PagePool& pool() { return pool_; }

 private:
  // The K or V block of `layer` in the page holding `pos`, and pos's place in that page.
  std::byte* block(int seq, int layer, int pos, bool value, int* offset) const;

  int n_layers_, max_positions_, page_tokens_, key_tile_;
  size_t row_bytes_;
  int page_shift_ = -1;  // log2(page_tokens_) when it is a power of two
  PagePool pool_;
  PageReclaimer* reclaimer_ = nullptr;
  std::vector<std::vector<PageId>> tables_;  // by sequence id
};

}  // namespace k25
