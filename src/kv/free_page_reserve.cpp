#include "kv/free_page_reserve.h"

#include <numeric>

namespace k25 {

size_t FreePageReserve::update(uint64_t allocations) {
  demand_[next_] = allocations - last_allocations_;
  next_ = (next_ + 1) % kWindow;
  last_allocations_ = allocations;
  return static_cast<size_t>(std::accumulate(demand_.begin(), demand_.end(), uint64_t{0}) /
                             kWindow);
}

}  // namespace k25
