// Something that holds pool pages nobody is using right now and can give them back on demand
// (the prefix cache): PagedKvCache asks it for pages before it reports the pool exhausted.
#pragma once

#include <cstddef>

namespace k25 {

class PageReclaimer {
 public:
  virtual ~PageReclaimer() = default;
  // Pages that reclaim_one() could return to the pool now, one call each.
  virtual size_t reclaimable() const = 0;
  // Returns one page to the pool; false when there is none to give.
  virtual bool reclaim_one() = 0;
};

}  // namespace k25
