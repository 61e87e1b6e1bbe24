#include "kv/staging_pool.h"

#include <utility>

namespace k25 {

StagingBuffer StagingPool::take(size_t bytes) {
  auto it = kept_.find(bytes);
  if (it == kept_.end() || it->second.empty()) return StagingBuffer(bytes);
  StagingBuffer buffer = std::move(it->second.back());
  it->second.pop_back();
  kept_bytes_ -= bytes;
  ++reused_;
  return buffer;
}

void StagingPool::give(StagingBuffer buffer) {
  if (buffer.empty() || kept_bytes_ + buffer.size() > budget_) return;  // freed here
  kept_bytes_ += buffer.size();
  kept_[buffer.size()].push_back(std::move(buffer));
}

}  // namespace k25
