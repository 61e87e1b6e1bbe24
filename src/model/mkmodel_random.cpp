#include "model/mkmodel_random.h"

#include <algorithm>
#include <cmath>

#include "core/bits.h"
#include "core/thread_pool.h"
#include "kernels/quant.h"

namespace k25 {
namespace {

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// xoshiro256+: fast, and its high bits are good enough for weight noise.
class Xoshiro256Plus {
 public:
  explicit Xoshiro256Plus(uint64_t seed) {
    for (uint64_t& word : s_) word = splitmix64_next(seed);
  }
  // Uniform in [-1, 1).
  float next_symmetric() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return static_cast<float>(result >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }

 private:
  uint64_t s_[4];
};

}  // namespace

std::vector<float> mkmodel_random_values(uint64_t seed, std::string_view name, MkInit init,
                                         int64_t n, ThreadPool& pool) {
  uint64_t mixed = seed ^ fnv1a(name);
  const uint64_t tensor_seed = splitmix64_next(mixed);
  // A uniform variable on [-a, a] has standard deviation a / sqrt(3).
  const float weight_scale = 0.02f * std::sqrt(3.0f);
  const float offset = init == MkInit::Norm ? 1.0f : 0.0f;
  const float scale = init == MkInit::Norm ? 0.05f : weight_scale;
  std::vector<float> values(static_cast<size_t>(n));
  // Fixed-size chunks, each with its own stream, so that threads can fill them independently.
  constexpr int64_t kChunk = 1 << 16;
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  pool.run([&](int thread) {
    std::vector<uint16_t> half(kChunk);
    for (int64_t c = thread; c < n_chunks; c += pool.size()) {
      uint64_t chunk_state = tensor_seed + static_cast<uint64_t>(c);
      Xoshiro256Plus rng(splitmix64_next(chunk_state));
      float* out = values.data() + c * kChunk;
      const int64_t len = std::min(kChunk, n - c * kChunk);
      for (int64_t i = 0; i < len; ++i) out[i] = offset + scale * rng.next_symmetric();
      quantize_row(DType::F16, out, half.data(), len);
      dequantize_row(DType::F16, half.data(), out, len);
    }
  });
  return values;
}

}  // namespace k25
