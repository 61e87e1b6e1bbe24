#include "kv/free_page_reserve.h"

#include <gtest/gtest.h>

namespace k25 {
namespace {

TEST(FreePageReserve, KeepsTheMeanDemandOfTheWindow) {
  FreePageReserve reserve;
  EXPECT_EQ(reserve.update(0), 0u);
  EXPECT_EQ(reserve.update(80), 80 / FreePageReserve::kWindow);  // one busy interval of eight
  uint64_t allocations = 80;
  for (size_t i = 0; i < FreePageReserve::kWindow; ++i) reserve.update(allocations += 40);
  EXPECT_EQ(reserve.update(allocations += 40), 40u);  // a steady 40 pages per interval
}

TEST(FreePageReserve, ShrinksToNothingOnceAllocationsStop) {
  FreePageReserve reserve;
  uint64_t allocations = 0;
  for (size_t i = 0; i < FreePageReserve::kWindow; ++i) reserve.update(allocations += 64);
  size_t previous = reserve.update(allocations);
  EXPECT_EQ(previous, 64u * (FreePageReserve::kWindow - 1) / FreePageReserve::kWindow);
  for (size_t i = 1; i < FreePageReserve::kWindow; ++i) {
    const size_t keep = reserve.update(allocations);
    EXPECT_LT(keep, previous);
    previous = keep;
  }
  EXPECT_EQ(previous, 0u);
}

}  // namespace
}  // namespace k25
