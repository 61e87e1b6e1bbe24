// Bit tricks used in more than one place: one copy each.
#pragma once

#include <concepts>
#include <cstdint>

namespace k25 {

// True for 1, 2, 4, ...; false for zero and negative numbers.
template <std::integral T>
constexpr bool is_power_of_two(T n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// splitmix64's output function applied to `x` (Steele, Lea and Flood, 2014): a cheap, well-mixed
// bijection of 64-bit values, for hashing keys and for deterministic pseudo-random numbers.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The splitmix64 generator: the next value of the sequence that `state` seeds.
constexpr uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t out = splitmix64(state);
  state += 0x9e3779b97f4a7c15ull;
  return out;
}

}  // namespace k25
