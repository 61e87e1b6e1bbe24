#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace k25 {

PagedKvCache::PagedKvCache(int n_layers, int kv_dim, int max_positions, size_t budget_bytes,
                           int page_tokens, KvDtype dtype)
    : n_layers_(n_layers),
      max_positions_(max_positions),
      page_tokens_(page_tokens),
      key_tile_(key_tile_width(page_tokens)),
      row_bytes_(static_cast<size_t>(kv_dim) * kv_dtype_bytes(dtype)),
      pool_(PageGeometry{page_tokens, n_layers, kv_dim, dtype}, budget_bytes) {
  if ((page_tokens & (page_tokens - 1)) == 0)
    page_shift_ = std::countr_zero(static_cast<unsigned>(page_tokens));
}

long PagedKvCache::pages_missing(int seq, int n_positions) const {
  if (seq < 0 || n_positions > max_positions_) return -1;
  const long needed = (static_cast<long>(n_positions) + page_tokens_ - 1) / page_tokens_;
  const long held =
      static_cast<size_t>(seq) < tables_.size() ? static_cast<long>(tables_[seq].size()) : 0;
  return needed > held ? needed - held : 0;
}

bool PagedKvCache::can_reserve(int seq, int n_positions) const {
  const long missing = pages_missing(seq, n_positions);
  return missing >= 0 && static_cast<size_t>(missing) <= pages_available();
}

size_t PagedKvCache::pages_available() const {
  return pool_.pages_free() + (reclaimer_ ? reclaimer_->reclaimable() : 0);
}

void PagedKvCache::adopt(int seq, const std::vector<PageId>& pages) {
  if (seq < 0) fail("KV cache: negative sequence id ", seq);
  if (!page_table(seq).empty()) {
    fail("KV cache: sequence ", seq, " adopts shared pages but already holds ",
         page_table(seq).size());
  }
  if (pages.size() * static_cast<size_t>(page_tokens_) > static_cast<size_t>(max_positions_)) {
    fail("KV cache: ", pages.size(), " adopted pages hold more than the context's ", max_positions_,
         " positions");
  }
  for (PageId page : pages) {
    if (pool_.ref_count(page) == 0)
      fail("KV cache: adopting page ", page, ", which is not allocated");
  }
  for (PageId page : pages) pool_.retain(page);
  if (static_cast<size_t>(seq) >= tables_.size()) tables_.resize(seq + 1);
  tables_[seq] = pages;
}

void PagedKvCache::reserve(int seq, int n_positions) {
  if (seq < 0) fail("KV cache: negative sequence id ", seq);
  if (n_positions > max_positions_) {
    fail("KV cache: sequence needs ", n_positions, " positions but the context holds ",
         max_positions_);
  }
  const long missing = pages_missing(seq, n_positions);
  if (missing == 0) return;
  // All or nothing: a failed reserve leaves the sequence and the pool as they were.
  if (static_cast<size_t>(missing) > pages_available()) {
    fail("KV pool exhausted: ", pool_.pages_used(), " pages of ", pool_.pages_total(),
         " in use; sequence ", seq, " needs ", missing, " more for ", n_positions,
         " positions (budget ", pool_.budget_bytes(), " bytes, ", pool_.page_bytes(),
         " bytes per page)");
  }
  if (static_cast<size_t>(seq) >= tables_.size()) tables_.resize(seq + 1);
  while (reclaimer_ && pool_.pages_free() < static_cast<size_t>(missing) &&
         reclaimer_->reclaim_one()) {
  }
  std::vector<PageId>& table = tables_[seq];
  table.reserve(table.size() + missing);  // a page allocated below is never lost to a bad_alloc
  for (long i = 0; i < missing; ++i) {
    // Cannot be empty: pages_available() was checked and the reclaimer gave its pages back.
    table.push_back(*pool_.allocate());
  }
}

void PagedKvCache::clear(int seq) {
  if (seq < 0 || static_cast<size_t>(seq) >= tables_.size()) return;
  for (PageId page : tables_[seq]) pool_.free(page);
  tables_[seq].clear();
  tables_[seq].shrink_to_fit();
}

void PagedKvCache::truncate(int seq, int n_positions) {
  if (seq < 0 || static_cast<size_t>(seq) >= tables_.size()) return;
  const size_t keep = (static_cast<size_t>(std::max(0, n_positions)) + page_tokens_ - 1) /
                      static_cast<size_t>(page_tokens_);
  std::vector<PageId>& table = tables_[seq];
  while (table.size() > keep) {
    pool_.free(table.back());
    table.pop_back();
  }
}

const std::vector<PageId>& PagedKvCache::page_table(int seq) const {
  static const std::vector<PageId> kEmpty;
  if (seq < 0 || static_cast<size_t>(seq) >= tables_.size()) return kEmpty;
  return tables_[seq];
}

std::byte* PagedKvCache::block(int seq, int layer, int pos, bool value, int* offset) const {
  const std::vector<PageId>& table = page_table(seq);
  if (pos < 0 || static_cast<size_t>(pos) >= table.size() * page_tokens_) {
    fail("KV cache: position ", pos, " of sequence ", seq, " not reserved");
  }
  if (layer < 0 || layer >= n_layers_) fail("KV cache: layer ", layer, " of ", n_layers_);
  // Attention asks once per page run, so this is on the hot path: a shift instead of a
  // division when page_tokens is a power of two (measured in docs/kv-cache.md).
  const int index = page_shift_ >= 0 ? pos >> page_shift_ : pos / page_tokens_;
  *offset = pos - index * page_tokens_;
  const PageId page = table[index];
  return value ? pool_.value_block(page, layer) : pool_.key_block(page, layer);
}

KeyRun PagedKvCache::key_run(int seq, int layer, int pos) {
  int offset = 0;
  std::byte* keys = block(seq, layer, pos, false, &offset);
  const int lane = offset % key_tile_;
  return {keys + static_cast<size_t>(offset - lane) * row_bytes_, lane, key_tile_,
          page_tokens_ - offset};
}

std::byte* PagedKvCache::value_rows(int seq, int layer, int pos, int* n_contiguous) {
  int offset = 0;
  std::byte* values = block(seq, layer, pos, true, &offset);
  *n_contiguous = page_tokens_ - offset;
  return values + static_cast<size_t>(offset) * row_bytes_;
}

}  // namespace k25
