#include "kv/l2_page_spans.h"

namespace k25 {

size_t l2_page_payload_bytes(const PageGeometry& g) {
  return size_t{2} * g.n_layers * g.page_tokens * g.row_bytes();
}

std::vector<std::span<std::byte>> l2_page_spans(const PagePool& pool, PageId page) {
  const PageGeometry& g = pool.geometry();
  const size_t block = size_t{1} * g.page_tokens * g.row_bytes();
  std::vector<std::span<std::byte>> spans;
  spans.reserve(2 * g.n_layers);
  for (int layer = 0; layer < g.n_layers; ++layer) {
    spans.emplace_back(pool.key_block(page, layer), block);
    spans.emplace_back(pool.value_block(page, layer), block);
  }
  return spans;
}

std::vector<std::span<const std::byte>> l2_page_const_spans(const PagePool& pool, PageId page) {
  const auto spans = l2_page_spans(pool, page);
  return {spans.begin(), spans.end()};
}

}  // namespace k25
