// Measures sustained memory read bandwidth over a buffer much larger than the last-level
// cache, with 1 thread and with every hardware thread, so kernel and decode speeds can be put
// next to what the machine can stream.
//   k25-membw [--mib N] [--threads "1 2"] [--reps N]
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

#if defined(__x86_64__)
// Sums the buffer with 128-bit loads (SSE2, which every x86-64 has: one core issues two per
// cycle, far more than DRAM delivers) and four independent accumulators (so the loop is limited
// by memory, not by add latency).
uint64_t read_range(const uint8_t* p, size_t bytes) {
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    a0 = _mm_add_epi64(a0, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
    a1 = _mm_add_epi64(a1, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
    a2 = _mm_add_epi64(a2, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
    a3 = _mm_add_epi64(a3, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
  }
  const __m128i s = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
  uint64_t out[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), s);
  return out[0] + out[1];
}
#else
// Elsewhere the same sum in 64-bit words, eight independent accumulators per 64-byte line (the
// compiler vectorises it with the architecture's baseline loads).
uint64_t read_range(const uint8_t* p, size_t bytes) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    uint64_t line[8];
    std::memcpy(line, p + i, sizeof(line));
    for (int k = 0; k < 8; ++k) acc[k] += line[k];
  }
  uint64_t sum = 0;
  for (uint64_t a : acc) sum += a;
  return sum;
}
#endif

double measure(const uint8_t* buf, size_t bytes, int n_threads, int reps) {
  double best = 0.0;
  std::vector<uint64_t> sums(n_threads);
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    const size_t per = bytes / n_threads / 128 * 128;
    for (int t = 0; t < n_threads; ++t) {
      threads.emplace_back([&, t] { sums[t] = read_range(buf + t * per, per); });
    }
    for (auto& th : threads) th.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(per) * n_threads / s / 1e9);
  }
  uint64_t total = 0;
  for (uint64_t v : sums) total += v;
  if (total == 42) std::printf(" ");  // keeps the reads from being optimised away
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int reps = 5;
  std::vector<int> thread_counts = {
      1, static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--mib" && i + 1 < argc) {
      mib = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      std::istringstream in(argv[++i]);
      int t;
      while (in >> t) thread_counts.push_back(std::max(1, t));
    } else {
      std::fprintf(stderr, "usage: k25-membw [--mib N] [--threads \"1 2\"] [--reps N]\n");
      return 2;
    }
  }
  if (mib < 1 || thread_counts.empty()) {
    std::fprintf(stderr, "error: k25-membw needs --mib >= 1 and at least one thread count\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  auto* buf = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t(64)));
  for (size_t i = 0; i < bytes; i += 4096) std::memset(buf + i, static_cast<int>(i >> 12), 4096);
  std::printf("buffer: %zu MiB, best of %d passes\n", mib, reps);
  for (int t : thread_counts) {
    std::printf("read bandwidth, %d thread(s): %.1f GB/s\n", t, measure(buf, bytes, t, reps));
  }
  ::operator delete(buf, std::align_val_t(64));
  return 0;
}
