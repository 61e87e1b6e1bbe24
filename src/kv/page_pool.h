// The L2 KV tier's memory: fixed-size pages carved from slabs under a hard byte budget.
//
// One page holds `page_tokens` consecutive positions of one sequence for every layer, K and V:
//   [layer 0 K][layer 0 V][layer 1 K][layer 1 V] ...   each block: page_tokens positions of kv_dim
// elements of the geometry's dtype (4 bytes for f32, 2 for f16): a V block is rows, a K block
// key tiles (kernels/kv_dtype.h) as PagedKvCache lays them out. The pool itself treats both as
// bytes.
// Every block starts on a 64-byte boundary (attention reads rows with SIMD loads).
//
// Slabs are allocated lazily, the first time a page in them is handed out, and are kept until
// the pool dies; page memory (slabs) never exceeds the budget given at construction. The pool's
// own bookkeeping (a few bytes per page) is outside the budget.
//
// Pages are reference counted so that one page can sit in several page tables at once (prefix
// sharing, docs/kv-cache.md "Prefix reuse and sessions"): allocate() hands out a page with one
// reference, retain() adds one, free() drops one and returns the page to the pool at zero.
//
// Thread-safety: none inside. allocate()/free() must come from one thread (the engine's);
// key_block()/value_block() only read immutable slab pointers and may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kernels/kv_dtype.h"

namespace k25 {

using PageId = uint32_t;

struct PageGeometry {
  int page_tokens = 16;  // positions per page
  int n_layers = 0;
  int kv_dim = 0;  // elements per K (or V) row
  KvDtype dtype = KvDtype::kF32;

  size_t row_bytes() const { return static_cast<size_t>(kv_dim) * kv_dtype_bytes(dtype); }
};

class PagePool {
 public:
  static constexpr size_t kAlignment = 64;
  // Slabs start on an OS page: blocks whose size is a multiple of 4096 can then be the
  // destination of an O_DIRECT read (an L3 restore reads into the page itself, disk_store.h).
  static constexpr size_t kSlabAlignment = 4096;
  // Slabs are about this size (a power-of-two number of pages, at least one page).
  static constexpr size_t kSlabTargetBytes = size_t{2} << 20;

  // Throws k25::Error when the geometry is not positive. A budget smaller than one page gives a
  // pool with zero pages.
  PagePool(PageGeometry geometry, size_t budget_bytes);
  ~PagePool();

  // Bytes of one page of `geometry` (padding included): what a budget is counted in.
  static size_t page_bytes_for(const PageGeometry& geometry);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // A free page, or nullopt when every page of the budget is in use. Reuses freed pages
  // first, most recently freed first (so pages whose memory was not released go first).
  std::optional<PageId> allocate();
  // Drops one reference; the page returns to the pool when none is left (returns true then).
  // Throws k25::Error on an id that is not currently allocated.
  bool free(PageId page);
  // Adds a reference to an allocated page (throws k25::Error otherwise).
  void retain(PageId page);
  // References held on `page` (0: not allocated).
  uint32_t ref_count(PageId page) const { return page < next_fresh_ ? refs_[page] : 0; }

  // Start of `layer`'s K (or V) block in `page`: page_tokens positions of geometry().row_bytes().
  std::byte* key_block(PageId page, int layer) const {
    return page_base(page) + layer * 2 * block_bytes_;
  }
  std::byte* value_block(PageId page, int layer) const {
    return page_base(page) + (layer * 2 + 1) * block_bytes_;
  }
  // The same as floats, for a pool of f32 rows (throws k25::Error for another dtype).
  float* keys(PageId page, int layer) const {
    require_f32();
    return reinterpret_cast<float*>(key_block(page, layer));
  }
  float* values(PageId page, int layer) const {
    require_f32();
    return reinterpret_cast<float*>(value_block(page, layer));
  }

  const PageGeometry& geometry() const { return geometry_; }
  size_t page_bytes() const { return page_bytes_; }  // including alignment padding
  size_t budget_bytes() const { return budget_bytes_; }
  size_t pages_total() const { return pages_total_; }
  size_t pages_used() const { return pages_used_; }
  size_t pages_free() const { return pages_total_ - pages_used_; }
  size_t bytes_allocated() const { return bytes_allocated_; }  // slab memory taken so far
  // Gives the memory of free pages back to the OS (madvise MADV_DONTNEED on each free page's
  // whole 4 KiB pages), so an engine whose cached KV moved to disk shrinks; a released page
  // reads as zeros and costs page faults when it is used again. The `keep` most recently freed
  // pages stay resident (allocate() hands them out first); pages released before are skipped.
  // Returns the bytes released by this call.
  size_t release_free_memory(size_t keep = 0);
  // Maps the memory of an allocated page that is about to be written whole (the destination of a
  // restore from L3 or the shared Redis tier) in one call, where the writes would fault it in one
  // OS page at a time: a fresh or released 192 KiB page took 672-684 us to write in a
  // shadow-paged VM, 360-371 us after this (docs/benchmarks.md, sessions 39-40). Cheap on a page
  // whose memory is mapped already.
  void populate(PageId page) const;
  // Pages handed out by allocate() since the pool was made.
  uint64_t allocations() const { return allocations_; }

 private:
  struct AlignedDelete {
    void operator()(std::byte* p) const;
  };
  // madvise(advice) on the OS pages lying wholly inside `page` (its neighbours share the others);
  // the bytes advised, 0 when the kernel refused.
  size_t advise_whole_os_pages(PageId page, int advice) const;
  // Throws k25::Error naming `action` ("freeing", ...) unless `page` is handed out.
  void require_allocated(PageId page, const char* action) const;
  std::byte* page_base(PageId page) const {
    return slabs_[page >> slab_shift_].get() + (page & slab_mask_) * page_bytes_;
  }
  void require_f32() const {
    if (geometry_.dtype != KvDtype::kF32) {
      fail("KV page pool: pages hold ", to_string(geometry_.dtype), " rows, not f32");
    }
  }

  PageGeometry geometry_;
  size_t budget_bytes_;
  size_t block_bytes_ = 0;  // one layer's K (or V) block, padded to kAlignment
  size_t page_bytes_ = 0;
  size_t pages_total_ = 0;
  int slab_shift_ = 0;  // pages per slab = 1 << slab_shift_
  PageId slab_mask_ = 0;
  std::vector<std::unique_ptr<std::byte[], AlignedDelete>> slabs_;
  size_t bytes_allocated_ = 0;
  PageId next_fresh_ = 0;  // pages [next_fresh_, pages_total_) were never handed out
  std::vector<PageId> free_list_;
  size_t released_free_ = 0;    // free_list_[0, released_free_) have had their memory released
  std::vector<uint32_t> refs_;  // references per page handed out so far (0: not allocated)
  size_t pages_used_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace k25
