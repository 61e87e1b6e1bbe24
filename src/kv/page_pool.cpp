#include "kv/page_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <new>

#include "core/error.h"

namespace k25 {

namespace {

size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

void PagePool::AlignedDelete::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t{kSlabAlignment});
}

size_t PagePool::page_bytes_for(const PageGeometry& geometry) {
  // One K and one V block per layer, each padded to kAlignment.
  const size_t block_bytes = round_up(
      size_t{static_cast<unsigned>(geometry.page_tokens)} * geometry.row_bytes(), kAlignment);
  return block_bytes * 2 * geometry.n_layers;
}

PagePool::PagePool(PageGeometry geometry, size_t budget_bytes)
    : geometry_(geometry), budget_bytes_(budget_bytes) {
  if (geometry.page_tokens <= 0 || geometry.n_layers <= 0 || geometry.kv_dim <= 0) {
    fail("KV page pool: page_tokens (", geometry.page_tokens, "), n_layers (", geometry.n_layers,
         ") and kv_dim (", geometry.kv_dim, ") must be positive");
  }
  page_bytes_ = page_bytes_for(geometry);
  block_bytes_ = page_bytes_ / (2 * geometry.n_layers);
  // Page ids are 32-bit; a budget beyond that many pages is clipped, never exceeded.
  pages_total_ = std::min<size_t>(budget_bytes / page_bytes_, std::numeric_limits<PageId>::max());
  while (slab_shift_ < 31 && (page_bytes_ << (slab_shift_ + 1)) <= kSlabTargetBytes) ++slab_shift_;
  slab_mask_ = (PageId{1} << slab_shift_) - 1;
}

PagePool::~PagePool() = default;

std::optional<PageId> PagePool::allocate() {
  PageId page;
  if (!free_list_.empty()) {
    page = free_list_.back();
    free_list_.pop_back();
    released_free_ = std::min(released_free_, free_list_.size());
  } else if (next_fresh_ < pages_total_) {
    page = next_fresh_++;
    refs_.push_back(0);  // grows with the pages handed out, not with the budget
    const size_t slab = page >> slab_shift_;
    if (slab == slabs_.size()) {
      // The last slab is cut short so that slab memory never passes pages_total_ pages.
      const size_t first = slab << slab_shift_;
      const size_t n_pages = std::min<size_t>(size_t{1} << slab_shift_, pages_total_ - first);
      const size_t bytes = n_pages * page_bytes_;
      slabs_.emplace_back(
          static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kSlabAlignment})));
      bytes_allocated_ += bytes;
    }
  } else {
    return std::nullopt;
  }
  refs_[page] = 1;
  ++pages_used_;
  ++allocations_;
  return page;
}

bool PagePool::free(PageId page) {
  require_allocated(page, "freeing");
  if (--refs_[page] > 0) return false;
  --pages_used_;
  free_list_.push_back(page);
  return true;
}

void PagePool::populate(PageId page) const {
  require_allocated(page, "populating");
  // A kernel without MADV_POPULATE_WRITE (before Linux 5.14) refuses it: the writes then fault
  // the memory in one OS page at a time, as they would have.
  advise_whole_os_pages(page, MADV_POPULATE_WRITE);
}

size_t PagePool::release_free_memory(size_t keep) {
  size_t released = 0;
  const size_t stop = free_list_.size() - std::min(keep, free_list_.size());
  for (; released_free_ < stop; ++released_free_) {
    // A failure (not expected on private anonymous memory) only means the memory stays.
    released += advise_whole_os_pages(free_list_[released_free_], MADV_DONTNEED);
  }
  return released;
}

size_t PagePool::advise_whole_os_pages(PageId page, int advice) const {
  const uintptr_t os_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(page_base(page));
  const uintptr_t first = (begin + os_page - 1) / os_page * os_page;
  const uintptr_t last = (begin + page_bytes_) / os_page * os_page;
  if (last <= first || ::madvise(reinterpret_cast<void*>(first), last - first, advice) != 0)
    return 0;
  return last - first;
}

void PagePool::require_allocated(PageId page, const char* action) const {
  if (page >= next_fresh_ || refs_[page] == 0) {
    fail("KV page pool: ", action, " page ", page, ", which is not allocated");
  }
}

void PagePool::retain(PageId page) {
  require_allocated(page, "retaining");
  ++refs_[page];
}

}  // namespace k25
