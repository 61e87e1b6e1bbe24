// Weight x activation products. Work is split over threads in chunks of rows (taken from a
// shared counter, so a thread slowed by other load on the machine takes fewer chunks). For one
// token (decode) each thread streams its rows one after another; for several tokens (prefill)
// the output is computed in register tiles of up to 4 rows x 4 tokens, so each weight block
// loaded serves several tokens, and a chunk of rows stays in L2 while all tokens pass over it.
//
// Quantised weights (Q8_0, Q4_0) are multiplied with activations quantised to Q8_0 once per
// call: integer dot products per 32-element block, scaled by d_w * d_x (d_x rounded to f16)
// and accumulated in float, which matches llama.cpp's numerics.
//
// With AVX2 and above, the quantised kernels work on groups of 16 weight rows repacked (see
// kernels/repack.h): the rows interleaved in 4-byte pieces, so one dpbusd (AVX-512: 16 rows) or
// one maddubs chain (AVX2: 8 rows) advances the dots of many rows with a token at once and every
// lane ends up holding the whole integer dot of one row; a float conversion and scale then serve
// 16 or 8 rows instead of one (packed_tiles_512.h, packed_tiles_256.h). Weights repacked at load
// (TensorView::packed) are used that way for any number of tokens; others are repacked on the
// fly, group by group, for prefill (kPackMinTokens tokens or more) and read as they are below
// that.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <new>
#include <type_traits>
#include <vector>

#include "core/chunk_runs.h"
#include "core/error.h"
#include "kernels/block_types.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "kernels/set/block_dot_exact.h"
#include "kernels/set/float_sums.h"
#include "kernels/set/quant_simd.h"
#include "kernels/set/set_entries.h"
#include "kernels/set/vnni.h"
#include "kernels/set/x86_intrinsics.h"

namespace k25::K25_KERNEL_SET {
namespace {

// The tile loops over rows and tokens must be unrolled early enough for GCC to keep the
// accumulator arrays in registers (otherwise it stores them to the stack every block).
#define K25_UNROLL _Pragma("GCC unroll 4")

// GCC reassociates a chain of integer adds (acc += maddubs(...) over a block's pieces) into a
// tree, which keeps every product of the block live at once and spills on 16 registers. An
// empty asm that claims to change the sum after each step keeps the chain a chain (avx2 set,
// 1 thread, 5632x2048 x 512 tokens, Intel Xeon: Q4_0 141 -> 208 GFLOP/s, Q8_0 106 -> 133).
// dpbusd accumulates inside the instruction, so the VNNI sets' chains need nothing.
template <typename V>
[[gnu::always_inline]] inline void keep_as_chain([[maybe_unused]] V& sum) {
#if !defined(K25_MATMUL_VNNI)
  asm("" : "+x"(sum));
#endif
}

constexpr int kMaxTile = 4;
// Tokens per register tile in prefill; without AVX-512 there are 16 vector registers, so the
// tiles use fewer tokens to keep the accumulators from spilling.
#if defined(__AVX512VL__)
constexpr int kTileTokens = 4;
constexpr int kF32TileTokens = 4;
#else
// The AVX2 tiles hold 8 accumulators; the sets without AVX2 keep 4 rows in the lanes of one
// vector per token, so 4 tokens share each weight block's unpacking and scales.
#if defined(__AVX2__)
constexpr int kTileTokens = 2;
#else
constexpr int kTileTokens = 4;
#endif
// F32 weights feed the multiply-adds straight from memory, so 4 x 3 accumulators and a token's
// vector fit in 16 registers (F16 and BF16 rows need registers of their own).
constexpr int kF32TileTokens = 3;
#endif
constexpr int kTileRows = 4;

// Activations quantised to Q8_0, laid out for aligned 32-byte loads: token t, block b has its
// quants at q + t * cols + 32 * b and its scale/bias at index b * n_tokens + t (block-major, so
// the scales of a tile's tokens are adjacent).
struct QuantizedActs {
  int8_t* q;
  // |q|, same layout, for the avx2 set's Q8_0 tiles (block_dots' kSymmetricQ8); null when the
  // call does not need it.
  int8_t* q_abs;
  float* d;
  // Per block: a correction added to the integer dot so that it comes out signed-correct when
  // the kernel offsets the weights to unsigned (see bias_multiplier()).
  int32_t* bias;
  int64_t cols;
  int64_t n_blocks;
  int64_t n_tokens;
};

// Grows-only 64-byte aligned scratch, one per calling thread.
class Scratch {
 public:
  ~Scratch() { ::operator delete(data_, std::align_val_t(64)); }
  void* get(size_t bytes) {
    if (bytes > capacity_) {
      ::operator delete(data_, std::align_val_t(64));
      data_ = nullptr;
      data_ = ::operator new(bytes, std::align_val_t(64));
      capacity_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// The integer kernels feed weights as the unsigned operand: Q4_0 nibbles are 0..15 (value + 8)
// and, with VNNI, Q8_0 quants are offset by +128. The per-block bias spread over the 8 lanes
// removes sum(x_q) * offset. The AVX2 Q8_0 kernel uses the sign trick instead and needs none.
int32_t bias_multiplier(QKind kind) {
  if (kind == QKind::kQ4) return 1;  // 8 * sum / 8 lanes
#if defined(K25_MATMUL_VNNI)
  return 16;  // 128 * sum / 8 lanes
#else
  return 0;
#endif
}

#if defined(__AVX2__)

inline int32_t sum_q8(const int8_t* q) {
  const __m256i pairs = _mm256_maddubs_epi16(
      _mm256_set1_epi8(1), _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
  const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  return hsum_i32(_mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1)));
}

// The 32 weight quants of a block as the unsigned (or, for AVX2 Q8_0, raw signed) operand.
template <QKind K>
inline __m256i load_weight_quants(const QBlock<K>* block) {
  if constexpr (K == QKind::kQ8) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block->qs));
#if defined(K25_MATMUL_VNNI)
    return _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
#else
    return q;
#endif
  } else {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block->qs));
    const __m256i both =
        _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
  }
}

// Integer dot of one weight block with one activation block, spread over 8 int32 lanes.
template <QKind K>
inline __m256i block_dot(__m256i w, __m256i x, __m256i bias) {
#if defined(K25_MATMUL_VNNI)
  return K25_DPBUSD256(bias, w, x);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (K == QKind::kQ8) {
    (void)bias;
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(pairs, ones);
  } else {
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones), bias);
  }
#endif
}

// Computes y for rows [0, R) of `w` (row stride w_row_bytes) and tokens [t0, t0 + T).
// `scale` is scratch for n_blocks * R * 4 floats.
template <QKind K, int R, int T>
void q_tile(const uint8_t* w, size_t w_row_bytes, const QuantizedActs& a, int t0, float* scale,
            float* y, int64_t y_stride) {
  const QBlock<K>* rows[R];
  K25_UNROLL
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const QBlock<K>*>(w + r * w_row_bytes);
  // Prefill: d_w * d_x for every (block, row, token), computed in a separate pass so that the
  // multiply-adds below take them as broadcast loads instead of register shuffles.
  for (int64_t b = 0; T > 1 && b < a.n_blocks; ++b) {
    const float* xd = a.d + b * a.n_tokens + t0;
    // Built from registers for T < 4: scalar stores followed by a vector load would stall on
    // store forwarding.
    const __m128 dx = T == 4 ? _mm_loadu_ps(xd)
                             : _mm_setr_ps(xd[0], T > 1 ? xd[1] : 0.0f, T > 2 ? xd[2] : 0.0f, 0.0f);
    K25_UNROLL
    for (int r = 0; r < R; ++r) {
      _mm_storeu_ps(scale + (b * R + r) * 4,
                    _mm_mul_ps(_mm_set1_ps(half_to_float(rows[r][b].d)), dx));
    }
  }
  __m256 acc[R][T];
  K25_UNROLL
  for (int r = 0; r < R; ++r) {
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int8_t* xq = a.q + t0 * a.cols;
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    __m256i wq[R];
    K25_UNROLL
    for (int r = 0; r < R; ++r) wq[r] = load_weight_quants<K>(rows[r] + b);
    const int32_t* xb = a.bias + b * a.n_tokens + t0;
    const float* s = scale + b * R * 4;
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256i x =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(xq + t * a.cols + 32 * b));
      const __m256i bias = _mm256_set1_epi32(xb[t]);
      K25_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256 dot = _mm256_cvtepi32_ps(block_dot<K>(wq[r], x, bias));
        const __m256 d =
            T == 1 ? _mm256_set1_ps(half_to_float(rows[r][b].d) * a.d[b * a.n_tokens + t0])
                   : _mm256_broadcast_ss(s + r * 4 + t);
        acc[r][t] = _mm256_fmadd_ps(dot, d, acc[r][t]);
      }
    }
  }
  K25_UNROLL
  for (int t = 0; t < T; ++t) {
    K25_UNROLL
    for (int r = 0; r < R; ++r) y[(t0 + t) * y_stride + r] = hsum(acc[r][t]);
  }
}

// Decode (one token): one row at a time, so each thread reads a single sequential stream
// (interleaving several rows measured up to 2x slower from DRAM), with four accumulators over
// consecutive blocks to hide the FMA latency.
template <QKind K>
float q_row(const QBlock<K>* row, const QuantizedActs& a) {
  __m256 acc[4];
  K25_UNROLL
  for (int u = 0; u < 4; ++u) acc[u] = _mm256_setzero_ps();
  const auto block = [&](int64_t b, __m256& sum) {
    const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b));
    const __m256i dot =
        block_dot<K>(load_weight_quants<K>(row + b), x, _mm256_set1_epi32(a.bias[b]));
    sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half_to_float(row[b].d) * a.d[b]),
                          sum);
  };
  int64_t b = 0;
  for (; b + 4 <= a.n_blocks; b += 4) {
    K25_UNROLL
    for (int u = 0; u < 4; ++u) block(b + u, acc[u]);
  }
  for (; b < a.n_blocks; ++b) block(b, acc[0]);
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

template <DType D>
inline __m256 load8(const uint8_t* row, int64_t c) {
  if constexpr (D == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + c));
    if constexpr (D == DType::F16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

#endif  // __AVX2__

template <DType D>
inline float load1(const uint8_t* row, int64_t c) {
  if constexpr (D == DType::F32) {
    return reinterpret_cast<const float*>(row)[c];
  } else if constexpr (D == DType::F16) {
    return half_to_float(reinterpret_cast<const uint16_t*>(row)[c]);
  } else {
    return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  }
}

// Float-weight tile: rows [0, R) of w against tokens [t0, t0 + T) of x (row length cols). Each
// (row, token) sum takes the same steps whatever R and T are.
// The columns after the last multiple of 8, one at a time. With FMA always fused: left to
// contraction, whether a product was rounded before its add depended on how the vectoriser
// treated each tile shape, so a token's result changed with the tile it was computed in.
inline float tail_mul_add(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

template <DType D, int R, int T>
void f_tile(const uint8_t* w, size_t w_row_bytes, const float* x, int64_t cols, int t0, float* y,
            int64_t y_stride) {
  float sums[R][T];
  int64_t c = 0;
#if defined(__AVX2__)
  __m256 acc[R][T];
  K25_UNROLL
  for (int r = 0; r < R; ++r) {
    K25_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
    K25_UNROLL
    for (int r = 0; r < R; ++r) wv[r] = load8<D>(w + r * w_row_bytes, c);
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + (t0 + t) * cols + c);
      K25_UNROLL
      for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  // Eight sums at a time where the tile has them (4 rows x 2 or 4 tokens, 2 x 4): at 64 columns
  // (stories260K) one sum at a time took as long as the multiply-adds.
  const __m256* flat = &acc[0][0];
  float* flat_sums = &sums[0][0];
  int i = 0;
  K25_UNROLL
  for (; i + 8 <= R * T; i += 8) _mm256_storeu_ps(flat_sums + i, hsums8(flat + i));
  K25_UNROLL
  for (; i < R * T; ++i) flat_sums[i] = hsum(flat[i]);
#else
  K25_UNROLL
  for (int r = 0; r < R; ++r) {
    K25_UNROLL
    for (int t = 0; t < T; ++t) sums[r][t] = 0.0f;
  }
#endif
  for (; c < cols; ++c) {
    K25_UNROLL
    for (int r = 0; r < R; ++r) {
      const float wv = load1<D>(w + r * w_row_bytes, c);
      K25_UNROLL
      for (int t = 0; t < T; ++t) sums[r][t] = tail_mul_add(wv, x[(t0 + t) * cols + c], sums[r][t]);
    }
  }
  K25_UNROLL
  for (int t = 0; t < T; ++t) {
    K25_UNROLL
    for (int r = 0; r < R; ++r) y[(t0 + t) * y_stride + r] = sums[r][t];
  }
}

#if !defined(__AVX2__)
// Integer kernel of the sets without AVX2: the exact integer dot of each block
// (block_dot_exact.h), then sum += dot * (d_w * d_x) block after block, so a (row, token) result
// is the same whatever tile it is computed in. The activations' biases are -sum(x) per block
// (bias_multiplier: 1 for Q4_0). With SSSE3 (x86) the tiles of 4 rows and the decode rows
// reduce four integer dots at once and take the float steps in vector lanes, each lane the
// same operations in the same order as this loop.
template <QKind K, int R, int T>
void q_tile_pairs(const QBlock<K>* const* rows, const QuantizedActs& a, int t0, float* y,
                  int64_t y_stride) {
  float sum[R][T] = {};
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const float* xd = a.d + b * a.n_tokens + t0;
    const int32_t* x_bias = a.bias + b * a.n_tokens + t0;
    K25_UNROLL
    for (int r = 0; r < R; ++r) {
      const WeightQuants wq = weight_quants<K>(rows[r][b]);
      const float dw = half_to_float(rows[r][b].d);
      K25_UNROLL
      for (int t = 0; t < T; ++t) {
        const int32_t dot = block_dot_exact<K>(wq, a.q + (t0 + t) * a.cols + 32 * b, -x_bias[t]);
        sum[r][t] += static_cast<float>(dot) * (dw * xd[t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = sum[r][t];
  }
}

#if defined(__SSSE3__)
// The 4 rows' f16 scales of block b as floats.
template <QKind K>
inline __m128 row_scales(const QBlock<K>* const* rows, int64_t b) {
  return halves_to_floats(_mm_setr_epi32(rows[0][b].d, rows[1][b].d, rows[2][b].d, rows[3][b].d));
}

// Rows in lanes: lane r of sum[t] is row r's sum for token t.
template <QKind K, int T>
void q_tile_4_rows(const QBlock<K>* const* rows, const QuantizedActs& a, int t0, float* y,
                   int64_t y_stride) {
  __m128 sum[T];
  for (int t = 0; t < T; ++t) sum[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    WeightQuants wq[4];
    for (int r = 0; r < 4; ++r) wq[r] = weight_quants<K>(rows[r][b]);
    const __m128 dw = row_scales<K>(rows, b);
    K25_UNROLL
    for (int t = 0; t < T; ++t) {
      const int64_t i = b * a.n_tokens + t0 + t;
      const int8_t* x = a.q + (t0 + t) * a.cols + 32 * b;
      __m128i dots[4];
      for (int r = 0; r < 4; ++r) dots[r] = block_dot_lanes<K>(wq[r], x);
      __m128i dot = lane_totals(dots);
      if constexpr (K == QKind::kQ4) dot = _mm_add_epi32(dot, _mm_set1_epi32(8 * a.bias[i]));
      const __m128 scale = _mm_mul_ps(dw, _mm_set1_ps(a.d[i]));
      sum[t] = _mm_add_ps(sum[t], _mm_mul_ps(_mm_cvtepi32_ps(dot), scale));
    }
  }
  for (int t = 0; t < T; ++t) _mm_storeu_ps(y + (t0 + t) * y_stride, sum[t]);
}
#endif

template <QKind K, int R, int T>
void q_tile(const uint8_t* w, size_t w_row_bytes, const QuantizedActs& a, int t0, float*, float* y,
            int64_t y_stride) {
  const QBlock<K>* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = reinterpret_cast<const QBlock<K>*>(w + r * w_row_bytes);
#if defined(__SSSE3__)
  if constexpr (R == 4) {
    q_tile_4_rows<K, T>(rows, a, t0, y, y_stride);
    return;
  }
#endif
  q_tile_pairs<K, R, T>(rows, a, t0, y, y_stride);
}

#if defined(__SSSE3__)
// Decode: blocks in lanes, four at a time; their four products join the sum in block order.
template <QKind K>
float q_row(const QBlock<K>* row, const QuantizedActs& a) {
  float sum = 0.0f;
  int64_t b = 0;
  for (; b + 4 <= a.n_blocks; b += 4) {
    __m128i dots[4];
    for (int i = 0; i < 4; ++i) {
      dots[i] = block_dot_lanes<K>(weight_quants<K>(row[b + i]), a.q + 32 * (b + i));
    }
    __m128i dot = lane_totals(dots);
    if constexpr (K == QKind::kQ4) {
      dot = _mm_add_epi32(
          dot, _mm_slli_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bias + b)), 3));
    }
    const __m128 dw =
        halves_to_floats(_mm_setr_epi32(row[b].d, row[b + 1].d, row[b + 2].d, row[b + 3].d));
    alignas(16) float products[4];
    _mm_store_ps(products, _mm_mul_ps(_mm_cvtepi32_ps(dot), _mm_mul_ps(dw, _mm_loadu_ps(a.d + b))));
    for (float p : products) sum += p;
  }
  for (; b < a.n_blocks; ++b) {
    const int32_t dot = block_dot_exact<K>(weight_quants<K>(row[b]), a.q + 32 * b, -a.bias[b]);
    sum += static_cast<float>(dot) * (half_to_float(row[b].d) * a.d[b]);
  }
  return sum;
}
#else
template <QKind K>
float q_row(const QBlock<K>* row, const QuantizedActs& a) {
  float y;
  q_tile<K, 1, 1>(reinterpret_cast<const uint8_t*>(row), 0, a, 0, nullptr, &y, 1);
  return y;
}
#endif

inline int32_t sum_q8(const int8_t* q) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += q[j];
  return s;
}
#endif

template <QKind K>
void q_decode_rows(const uint8_t* w, size_t w_row_bytes, const QuantizedActs& a, int64_t r0,
                   int64_t r1, float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    y[r] = q_row<K>(reinterpret_cast<const QBlock<K>*>(w + r * w_row_bytes), a);
  }
}

// Splits [0, rows) into chunks and runs `body(r0, r1)` on each over the pool: each thread
// takes the chunks of its own contiguous run first, then helps the others from the back of
// theirs (core/chunk_runs.h).
template <typename Body>
void parallel_rows(ThreadPool& pool, int64_t rows, int64_t chunk, const Body& body) {
  if (pool.size() == 1 || rows <= chunk) {
    body(int64_t{0}, rows);
    return;
  }
  ChunkRuns runs(pool.size(), (rows + chunk - 1) / chunk);
  const auto run_chunk = [&](int64_t c) { body(c * chunk, std::min(rows, (c + 1) * chunk)); };
  pool.run([&](int self) {
    for (int64_t c; (c = runs.take_front(self)) >= 0;) run_chunk(c);
    for (int k = 1; k < runs.n_runs(); ++k) {
      const int other = (self + k) % runs.n_runs();
      for (int64_t c; (c = runs.take_back(other)) >= 0;) run_chunk(c);
    }
  });
}

#if defined(K25_MATMUL_PACKED)

constexpr int kGroupRows = kPackedGroupRows;
// Below this many tokens, weights that were not repacked at load are read as they are.
constexpr int kPackMinTokens = 16;

#define K25_UNROLL8 _Pragma("GCC unroll 8")

// Decode streams each thread's packed groups with a software prefetch some KiB ahead, into L1:
// against the L2 hint (T1) it had, 1.1B decode on AMD Zen 5 (alternating runs, 1 / 2 threads):
// Q8_0 +12% / +8% (avx512 set), +11% / +10% (avx2); Q4_0 +10% / +10%, +6% / +2%; Q4_K_M
// +3% / +1%, +4% / +10%. The non-temporal hint did as well as T0 on Q4_0.
constexpr auto kDecodePrefetchHint = _MM_HINT_T0;
// How far ahead: 4 KiB. The 16 KiB it was streamed from L3 and DRAM slower on AMD Zen 5 (1.1B
// decode, alternating runs, 2 threads, tok/s at 16 / 4 KiB: avx2 Q8_0 44 / 50-52, Q4_0 71-75 /
// 76, Q4_K_M 79-83 / 80-85; avx512 Q4_0 72-74 / 78-79, Q4_K_M 76-80 / 85-90, Q6_K 55 / 66; 2, 3
// and 6 KiB within a few percent of 4).
constexpr size_t kPrefetchBytes = 4096;

// Prefetches the `bytes` (a multiple of 64) that lie kPrefetchBytes after `from`.
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* from, size_t bytes) {
  for (size_t i = 0; i < bytes; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(from + kPrefetchBytes + i), kDecodePrefetchHint);
  }
}

// Where a Q8_0 (kQ8) or Q4_0 group's blocks lie, known at compile time: the tiles' address
// arithmetic then costs a shift and a mask (with the block size read at run time, the avx512
// set's Q4_0 prefill ran 8-12% slower).
template <QKind K>
constexpr PackedBlockUnits kUnits{packed_quant_bytes(K == QKind::kQ8 ? DType::Q8_0 : DType::Q4_0)};

// One group of kGroupRows repacked rows (layout in kernels/repack.h).
struct PackedGroup {
  const uint8_t* base;
  int64_t n_blocks;
  // Block b's quants, and its 16 f16 row scales.
  template <QKind K>
  const uint8_t* quants(int64_t b) const {
    return base + kUnits<K>.quants_at(b);
  }
  template <QKind K>
  const uint16_t* scales(int64_t b) const {
    return reinterpret_cast<const uint16_t*>(base + kUnits<K>.scales_at(b));
  }
};

// A group's rows in 256-bit halves of 8 (a 64-byte piece: rows 0-7 in its first 32 bytes).
constexpr int kHalfRows = 8;

// Stores the first `valid` (<= 8, may be <= 0) lanes of v at y.
inline void store_rows(float* y, __m256 v, int valid) {
  if (valid >= kHalfRows) {
    _mm256_storeu_ps(y, v);
  } else if (valid > 0) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lanes), v);
  }
}

#include "kernels/set/packed_halves_256.h"
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include "kernels/set/packed_tiles_512.h"
#else
#include "kernels/set/packed_tiles_256.h"
#endif
#include "kernels/set/packed_kquants.h"

// The number of groups a thread takes at a time. Decode and small batches are bound by reading
// the weights: a thread reads its own run of chunks as one stream (parallel_rows), so chunks can
// be small, and the last ones, which a thread done early takes from the other's run, balance the
// threads to within 1/16 of a thread's share (4 chunks per thread before: 2-thread decode, Zen 5,
// alternating runs, qwen3moe-small Q4_K_M +4%, TinyLlama Q4_K_M +4%). Larger batches take panels
// that stay in L2.
int64_t group_chunk(int64_t n_groups, int n_tokens, int tile_tokens, int64_t n_threads) {
  return n_tokens <= tile_tokens
             ? std::max<int64_t>(1, (n_groups + 16 * n_threads - 1) / (16 * n_threads))
             : std::min<int64_t>(8, (n_groups + n_threads - 1) / n_threads);
}

// Whether the tiles of repacked groups read |x| (QuantizedActs::q_abs): the avx2 set's Q8_0
// tiles on groups whose quants are in [-127, 127].
constexpr bool packed_reads_abs(QKind kind) {
  return kind == QKind::kQ8 && kPackedQ8NeedsSymmetric;
}

// Runs every token over groups [g0, g1) of 16 rows, in tiles of up to kPackTokens tokens; a
// token's arithmetic is the same in every tile size, so its result does not depend on the other
// tokens of the call. With `packed` (the weights repacked at load, see kernels/repack.h) the
// groups are read in place: a thread reads its groups as one sequential stream. Otherwise (weights
// built by hand, prefill only) each thread repacks a group into a buffer of its own (35 KB for
// Q8_0 at 2048 columns, so it stays in L1/L2): that took under a tenth of a 512-token prefill
// (measured). Either way the group stays in L1/L2 while the activations stream from L2/L3. The
// avx512 set takes the groups two at a time when there is more than one token (pair tiles).
template <QKind K>
void packed_groups(const uint8_t* w, size_t w_row_bytes, const uint8_t* packed, int64_t rows,
                   const QuantizedActs& acts, float* y, int64_t g0, int64_t g1) {
  constexpr DType kType = K == QKind::kQ8 ? DType::Q8_0 : DType::Q4_0;
  // The avx2 set's faster Q8_0 tiles need a group's quants in [-127, 127] (vnni.h) and |x|: the
  // flags after a matrix repacked at load say which groups have them (kernels/repack.h); a group
  // packed here, or activations without |x|, take the tiles that read any quant.
  constexpr bool kSymmetric = packed_reads_abs(K);
  static constexpr auto tiles = packed_tiles<K, false>();
  static constexpr auto symmetric_tiles = packed_tiles<K, kSymmetric>();
  const uint8_t* minimum_flags = kSymmetric && packed != nullptr && acts.q_abs != nullptr
                                     ? packed + packed_q8_minimum_flags(rows, acts.cols)
                                     : nullptr;
  const int n_tokens = static_cast<int>(acts.n_tokens);
  const size_t group_bytes = packed_group_bytes(kType, acts.cols);
  uint8_t* buffer = nullptr;
  if (packed == nullptr) {
    thread_local Scratch scratch;
    buffer = static_cast<uint8_t*>(scratch.get(2 * group_bytes));  // a pair tile's two groups
  }
  // Group g (its rows from r0), read in place or packed into the buffer at `slot`.
  const auto group_at = [&](int64_t g, int64_t r0, int valid, int slot) {
    if (packed != nullptr) return PackedGroup{packed + g * group_bytes, acts.n_blocks};
    uint8_t* into = buffer + slot * group_bytes;
    pack_group(kType, w, w_row_bytes, r0, valid, acts.n_blocks, into);
    return PackedGroup{into, acts.n_blocks};
  };
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t r0 = g * kGroupRows;
    const int valid = static_cast<int>(std::min<int64_t>(kGroupRows, rows - r0));
#if defined(K25_PACKED_GROUP_PAIRS)
    if (n_tokens > 1 && g + 1 < g1) {
      static constexpr auto pair_tiles = packed_pair_tiles<K>();
      const int valid1 = static_cast<int>(std::min<int64_t>(kGroupRows, rows - r0 - kGroupRows));
      const PackedGroup p0 = group_at(g, r0, valid, 0);
      const PackedGroup p1 = group_at(g + 1, r0 + kGroupRows, valid1, 1);
      for (int t0 = 0; t0 < n_tokens; t0 += kPairTokens) {
        pair_tiles[std::min(kPairTokens, n_tokens - t0) - 1](p0, p1, acts, t0, y + r0, rows,
                                                             valid1);
      }
      ++g;
      continue;
    }
#endif
    const PackedGroup p = group_at(g, r0, valid, 0);
    const auto& group_tiles =
        minimum_flags != nullptr && minimum_flags[g] == 0 ? symmetric_tiles : tiles;
    for (int t0 = 0; t0 < n_tokens; t0 += kPackTokens) {
      group_tiles[std::min(kPackTokens, n_tokens - t0) - 1](p, acts, t0, y + r0, rows, valid);
    }
  }
}

// Groups [g0, g1) of one matrix (a part of a parallel section over several).
struct GroupWork {
  int64_t n_groups;
  std::function<void(int64_t g0, int64_t g1)> run;
};

// The groups of one Q8_0 / Q4_0 matrix (repacked, or with `packed` null packed group by group)
// as a part of a parallel section.
GroupWork packed_work(QKind kind, const uint8_t* w, size_t w_row_bytes, const uint8_t* packed,
                      int64_t rows, const QuantizedActs& acts, float* y) {
  GroupWork work{packed_group_count(rows), {}};
  if (kind == QKind::kQ8) {
    work.run = [=, &acts](int64_t g0, int64_t g1) {
      packed_groups<QKind::kQ8>(w, w_row_bytes, packed, rows, acts, y, g0, g1);
    };
  } else {
    work.run = [=, &acts](int64_t g0, int64_t g1) {
      packed_groups<QKind::kQ4>(w, w_row_bytes, packed, rows, acts, y, g0, g1);
    };
  }
  return work;
}

// Several matrices that read the same input (q, k and v; gate and up) as one parallel section
// over all their groups laid end to end: in decode the small ones (k and v of a GQA model: 16
// groups each) no longer cost a section of their own, and the threads' last chunks balance over
// the whole set instead of each matrix's. Every group runs what it runs in a section of its own.
void parallel_group_works(ThreadPool& pool, const std::vector<GroupWork>& works, int n_tokens,
                          int tile_tokens) {
  int64_t total = 0;
  for (const GroupWork& w : works) total += w.n_groups;
  const int64_t chunk = group_chunk(total, n_tokens, tile_tokens, pool.size());
  parallel_rows(pool, total, chunk, [&](int64_t g0, int64_t g1) {
    int64_t base = 0;
    for (const GroupWork& w : works) {
      const int64_t lo = std::max(g0, base), hi = std::min(g1, base + w.n_groups);
      if (lo < hi) w.run(lo - base, hi - base);
      base += w.n_groups;
    }
  });
}

#endif  // K25_MATMUL_PACKED

// Quantises the n_tokens rows of x (cols each) to `format`, a_row_bytes apart, over the pool
// when there is enough work.
void quantize_act_rows(ActFormat format, const float* x, int n_tokens, int64_t cols, uint8_t* acts,
                       size_t a_row_bytes, ThreadPool& pool) {
  const auto quantize = [&](int t0, int t1) {
    for (int t = t0; t < t1; ++t) quantize_acts(format, x + t * cols, acts + t * a_row_bytes, cols);
  };
  const int n_threads = pool.size();
  if (n_threads > 1 && n_tokens >= 2 * n_threads && n_tokens * cols >= (1 << 16)) {
    pool.run([&](int i) {
      quantize(static_cast<int>(int64_t{n_tokens} * i / n_threads),
               static_cast<int>(int64_t{n_tokens} * (i + 1) / n_threads));
    });
  } else {
    quantize(0, n_tokens);
  }
}

// Below this many multiply-adds (tens of microseconds of work), waking the workers and waiting
// for them costs more than they save, and much more when the machine is oversubscribed.
ThreadPool& pool_for(int64_t multiply_adds, ThreadPool& shared_pool) {
  constexpr int64_t kMinParallelWork = int64_t{1} << 18;
  thread_local ThreadPool inline_pool(1);
  return multiply_adds < kMinParallelWork ? inline_pool : shared_pool;
}

#if defined(K25_MATMUL_PACKED)
bool is_packed_k(const TensorView& w) {
  return w.packed != nullptr &&
         (w.type == DType::Q4_K || w.type == DType::Q5_K || w.type == DType::Q6_K);
}

// x's n_tokens rows (cols each) as the packed K-quant kernels take them: Q8_K rows and, for
// Q4_K and Q5_K, the sums of x over sub-block pairs (computed for every type: cheap, and then one
// quantisation serves matrices of each type). In this thread's scratch until the next call.
PackedKActs quantize_k_acts(const float* x, int n_tokens, int64_t cols, ThreadPool& pool) {
  const int64_t n_super = cols / 256;
  const size_t a_row_bytes = act_row_bytes(ActFormat::kQ8_K, cols);
  const size_t rows_bytes = (a_row_bytes * static_cast<size_t>(n_tokens) + 63) / 64 * 64;
  thread_local Scratch scratch;
  auto* base =
      static_cast<uint8_t*>(scratch.get(rows_bytes + static_cast<size_t>(n_tokens * n_super) * 16));
  quantize_act_rows(ActFormat::kQ8_K, x, n_tokens, cols, base, a_row_bytes, pool);
  auto* min_pairs = reinterpret_cast<int32_t*>(base + rows_bytes);
  const PackedKActs acts{base, a_row_bytes, min_pairs, n_super};
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t b = 0; b < n_super; ++b) {
      const int16_t* bsums = acts.block(t, b).bsums;
      for (int q = 0; q < 4; ++q) {
        const auto lo = static_cast<uint16_t>(bsums[4 * q] + bsums[4 * q + 1]);
        const auto hi = static_cast<uint16_t>(bsums[4 * q + 2] + bsums[4 * q + 3]);
        min_pairs[(t * n_super + b) * 4 + q] = static_cast<int32_t>(lo | (uint32_t{hi} << 16));
      }
    }
  }
  return acts;
}

// Q4_K / Q5_K / Q6_K weights repacked at load (packed_kquants.h), for any number of tokens:
// groups [g0, g1).
template <typename Kind>
void packed_k_groups(const uint8_t* packed, int64_t rows, int64_t cols, const PackedKActs& acts,
                     int n_tokens, float* y, int64_t g0, int64_t g1) {
  static constexpr auto tiles = packed_k_tiles<Kind>();
  const size_t group_bytes = packed_group_bytes(Kind::kType, cols);
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t r0 = g * kGroupRows;
    const int valid = static_cast<int>(std::min<int64_t>(kGroupRows, rows - r0));
    for (int t0 = 0; t0 < n_tokens; t0 += kPackedKTokens) {
      tiles[std::min(kPackedKTokens, n_tokens - t0) - 1](packed + g * group_bytes, acts, t0, y + r0,
                                                         rows, valid);
    }
  }
}

// The groups of one repacked K-quant matrix as a part of a parallel section.
GroupWork packed_k_work(const TensorView& w, const PackedKActs& acts, int n_tokens, float* y) {
  const auto* packed = static_cast<const uint8_t*>(w.packed);
  const int64_t rows = w.n_rows(), cols = w.row_length();
  GroupWork work{packed_group_count(rows), {}};
  if (w.type == DType::Q4_K) {
    work.run = [=, &acts](int64_t g0, int64_t g1) {
      packed_k_groups<PackedQ4k>(packed, rows, cols, acts, n_tokens, y, g0, g1);
    };
  } else if (w.type == DType::Q5_K) {
    work.run = [=, &acts](int64_t g0, int64_t g1) {
      packed_k_groups<PackedQ5k>(packed, rows, cols, acts, n_tokens, y, g0, g1);
    };
  } else {
    work.run = [=, &acts](int64_t g0, int64_t g1) {
      packed_k_groups<PackedQ6k>(packed, rows, cols, acts, n_tokens, y, g0, g1);
    };
  }
  return work;
}
#endif

// Tile function tables indexed [rows - 1][tokens - 1].
using QTileFn = void (*)(const uint8_t*, size_t, const QuantizedActs&, int, float*, float*,
                         int64_t);
using FTileFn = void (*)(const uint8_t*, size_t, const float*, int64_t, int, float*, int64_t);

template <QKind K, int R>
constexpr std::array<QTileFn, kMaxTile> q_tiles_for_rows() {
  return {&q_tile<K, R, 1>, &q_tile<K, R, 2>, &q_tile<K, R, 3>, &q_tile<K, R, 4>};
}
template <QKind K>
constexpr std::array<std::array<QTileFn, kMaxTile>, kMaxTile> q_tiles() {
  return {q_tiles_for_rows<K, 1>(), q_tiles_for_rows<K, 2>(), q_tiles_for_rows<K, 3>(),
          q_tiles_for_rows<K, 4>()};
}
template <DType D, int R>
constexpr std::array<FTileFn, kMaxTile> f_tiles_for_rows() {
  return {&f_tile<D, R, 1>, &f_tile<D, R, 2>, &f_tile<D, R, 3>, &f_tile<D, R, 4>};
}
template <DType D>
constexpr std::array<std::array<FTileFn, kMaxTile>, kMaxTile> f_tiles() {
  return {f_tiles_for_rows<D, 1>(), f_tiles_for_rows<D, 2>(), f_tiles_for_rows<D, 3>(),
          f_tiles_for_rows<D, 4>()};
}

constexpr auto kQ8Tiles = q_tiles<QKind::kQ8>();
constexpr auto kQ4Tiles = q_tiles<QKind::kQ4>();
constexpr auto kF32Tiles = f_tiles<DType::F32>();
constexpr auto kF16Tiles = f_tiles<DType::F16>();
constexpr auto kBF16Tiles = f_tiles<DType::BF16>();

// |q| of a Q8_0 block's 32 quants (in [-127, 127], so |q| is an int8). Vectorised by hand: as a
// loop GCC left it scalar, which took a sixth of a 256 x 2048 decode product in L2.
inline void store_abs_block(const int8_t* q, int8_t* out) {
#if defined(__AVX2__)
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))));
#else
  for (int j = 0; j < 32; ++j) out[j] = static_cast<int8_t>(std::abs(q[j]));
#endif
}

// Quantises tokens [t_begin, t_end) of x into `out` (whose arrays the caller allocated).
void quantize_tokens(const float* x, int t_begin, int t_end, int32_t bias_mult,
                     const QuantizedActs& out) {
  for (int t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < out.n_blocks; ++b) {
      const int64_t off = t * out.cols + 32 * b;
      const int64_t i = b * out.n_tokens + t;
      out.d[i] = half_to_float(float_to_half(quantize_block_q8_0(x + off, out.q + off)));
      if (out.q_abs != nullptr) store_abs_block(out.q + off, out.q_abs + off);
      out.bias[i] = bias_mult == 0 ? 0 : -bias_mult * sum_q8(out.q + off);
    }
  }
}

int64_t chunk_rows(int64_t rows, int n_tokens, int n_threads) {
  // Decode: a few chunks per thread so a slowed thread does not hold everyone up. Prefill:
  // a panel of rows small enough to stay in L2 while all token tiles pass over it.
  const int64_t per_thread = (rows + n_threads - 1) / n_threads;
  int64_t chunk = n_tokens == 1 ? std::max<int64_t>(16, (per_thread + 3) / 4)
                                : std::min<int64_t>(64, per_thread);
  chunk = (chunk + kTileRows - 1) / kTileRows * kTileRows;
  return std::max<int64_t>(chunk, kTileRows);
}

// x's n_tokens rows (cols each) as Q8_0 blocks with their scales and biases (quantize_tokens),
// and with_abs their absolute values, over the pool when there is enough work. In this thread's
// scratch until the next call.
QuantizedActs quantize_q8_acts(const float* x, int n_tokens, int64_t cols, int32_t bias_mult,
                               bool with_abs, ThreadPool& pool) {
  const int64_t n_blocks = cols / 32;
  const size_t q_bytes = static_cast<size_t>(n_tokens * cols);
  const size_t abs_bytes = with_abs ? q_bytes : 0;
  const size_t meta_bytes = static_cast<size_t>(n_tokens * n_blocks) * 4;
  thread_local Scratch scratch;
  auto* base = static_cast<uint8_t*>(scratch.get(q_bytes + abs_bytes + 2 * meta_bytes + 64));
  // q_bytes is a multiple of 32, so |q| stays 32-byte and the metadata 4-byte aligned.
  uint8_t* meta = base + q_bytes + abs_bytes;
  const QuantizedActs acts{reinterpret_cast<int8_t*>(base),
                           with_abs ? reinterpret_cast<int8_t*>(base + q_bytes) : nullptr,
                           reinterpret_cast<float*>(meta),
                           reinterpret_cast<int32_t*>(meta + meta_bytes),
                           cols,
                           n_blocks,
                           n_tokens};
  const int n_threads = pool.size();
  if (n_threads > 1 && n_tokens >= 2 * n_threads && n_tokens * cols >= (1 << 16)) {
    pool.run([&](int i) {
      const int t0 = static_cast<int>(int64_t{n_tokens} * i / n_threads);
      const int t1 = static_cast<int>(int64_t{n_tokens} * (i + 1) / n_threads);
      quantize_tokens(x, t0, t1, bias_mult, acts);
    });
  } else {
    quantize_tokens(x, 0, n_tokens, bias_mult, acts);
  }
  return acts;
}

// The types of kernels/block_types.h: activations quantised once per call, then one dot
// product per (row, token). For several tokens a chunk of rows stays in L2 while every token
// passes over it.
void block_type_matmul(const BlockTypeKernels& k, const uint8_t* w, size_t w_row_bytes,
                       int64_t rows, int64_t cols, const float* x, int n_tokens, float* y,
                       int64_t chunk, ThreadPool& pool) {
  const size_t a_row_bytes = act_row_bytes(k.act, cols);
  thread_local Scratch scratch;
  auto* acts = static_cast<uint8_t*>(scratch.get(a_row_bytes * static_cast<size_t>(n_tokens)));
  quantize_act_rows(k.act, x, n_tokens, cols, acts, a_row_bytes, pool);
  parallel_rows(pool, rows, chunk, [&](int64_t r0, int64_t r1) {
    if (k.dot_tile == nullptr || n_tokens == 1) {
      for (int t = 0; t < n_tokens; ++t) {
        const uint8_t* a = acts + t * a_row_bytes;
        float* yt = y + static_cast<int64_t>(t) * rows;
        for (int64_t r = r0; r < r1; ++r) yt[r] = k.vec_dot(w + r * w_row_bytes, a, cols);
      }
      return;
    }
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxTile) {
      const int nt = std::min(kMaxTile, n_tokens - t0);
      for (int64_t r = r0; r < r1; r += kMaxTile) {
        const int nr = static_cast<int>(std::min<int64_t>(kMaxTile, r1 - r));
        k.dot_tile(w + r * w_row_bytes, w_row_bytes, nr, acts + t0 * a_row_bytes, a_row_bytes, nt,
                   cols, y + static_cast<int64_t>(t0) * rows + r, rows);
      }
    }
  });
}

// Refuses a tensor whose data cannot hold its rows.
void check_weight_data(const TensorView& w) {
  const size_t needed = row_bytes(w.type, w.row_length()) * static_cast<size_t>(w.n_rows());
  if (w.data == nullptr || w.bytes < needed) {
    fail("matmul: weight tensor '", w.name, "' has ", w.bytes, " bytes of data, needs ", needed);
  }
}

}  // namespace

void matmul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool& shared_pool) {
  const int64_t cols = w.row_length();
  const int64_t rows = w.n_rows();
  const size_t w_row_bytes = row_bytes(w.type, cols);
  check_weight_data(w);
  if (n_tokens <= 0 || rows == 0) return;
  ThreadPool& pool = pool_for(rows * cols * n_tokens, shared_pool);
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int n_threads = pool.size();
  const int64_t chunk = chunk_rows(rows, n_tokens, n_threads);
  const int tile_tokens = n_tokens == 1 ? 1 : kTileTokens;

  if (w.type == DType::Q8_0 || w.type == DType::Q4_0) {
    const QKind kind = w.type == DType::Q8_0 ? QKind::kQ8 : QKind::kQ4;
#if defined(K25_MATMUL_PACKED)
    const auto* w_packed = static_cast<const uint8_t*>(w.packed);
    const bool packed = w_packed != nullptr || n_tokens >= kPackMinTokens;
    // The packed kernel sums the 32 products of a block in one lane: the full offset correction.
    const int32_t bias_mult = packed ? packed_bias_multiplier(kind) : bias_multiplier(kind);
    const bool with_abs = w_packed != nullptr && packed_reads_abs(kind);
#else
    const int32_t bias_mult = bias_multiplier(kind);
    const bool with_abs = false;
#endif
    const QuantizedActs acts = quantize_q8_acts(x, n_tokens, cols, bias_mult, with_abs, pool);
#if defined(K25_MATMUL_PACKED)
    if (packed) {
      parallel_group_works(pool, {packed_work(kind, wdata, w_row_bytes, w_packed, rows, acts, y)},
                           n_tokens, kPackTokens);
      return;
    }
#endif
    if (n_tokens == 1) {
      parallel_rows(pool, rows, chunk, [&](int64_t r0, int64_t r1) {
        if (kind == QKind::kQ8) {
          q_decode_rows<QKind::kQ8>(wdata, w_row_bytes, acts, r0, r1, y);
        } else {
          q_decode_rows<QKind::kQ4>(wdata, w_row_bytes, acts, r0, r1, y);
        }
      });
      return;
    }
    const auto& tiles = kind == QKind::kQ8 ? kQ8Tiles : kQ4Tiles;
    parallel_rows(pool, rows, chunk, [&](int64_t r0, int64_t r1) {
      thread_local std::vector<float> scale;
      scale.resize(static_cast<size_t>(acts.n_blocks) * kTileRows * 4);
      for (int t0 = 0; t0 < n_tokens; t0 += tile_tokens) {
        const int nt = std::min(tile_tokens, n_tokens - t0);
        for (int64_t r = r0; r < r1; r += kTileRows) {
          const int nr = static_cast<int>(std::min<int64_t>(kTileRows, r1 - r));
          tiles[nr - 1][nt - 1](wdata + r * w_row_bytes, w_row_bytes, acts, t0, scale.data(), y + r,
                                rows);
        }
      }
    });
    return;
  }

#if defined(K25_MATMUL_PACKED)
  if (is_packed_k(w)) {
    const PackedKActs acts = quantize_k_acts(x, n_tokens, cols, pool);
    parallel_group_works(pool, {packed_k_work(w, acts, n_tokens, y)}, n_tokens, kPackedKTokens);
    return;
  }
#endif
  if (const BlockTypeKernels* k = block_type_kernels(w.type)) {
    block_type_matmul(*k, wdata, w_row_bytes, rows, cols, x, n_tokens, y, chunk, pool);
    return;
  }

  const std::array<std::array<FTileFn, kMaxTile>, kMaxTile>* tiles = nullptr;
  switch (w.type) {
    case DType::F32:
      tiles = &kF32Tiles;
      break;
    case DType::F16:
      tiles = &kF16Tiles;
      break;
    case DType::BF16:
      tiles = &kBF16Tiles;
      break;
    default:
      fail("matmul: unsupported type id ", static_cast<uint32_t>(w.type), " of tensor '", w.name,
           "'");
  }
  // Every token count, one included, runs the tiles: a (row, token) result is the same sum in
  // the same order whatever else shares the call, so a token's output does not depend on the
  // batch (a preempted sequence that recomputes its KV gets the same bits).
  const int f_tile_tokens = w.type == DType::F32 && n_tokens > 1 ? kF32TileTokens : tile_tokens;
  parallel_rows(pool, rows, chunk, [&](int64_t r0, int64_t r1) {
    for (int t0 = 0; t0 < n_tokens; t0 += f_tile_tokens) {
      const int nt = std::min(f_tile_tokens, n_tokens - t0);
      for (int64_t r = r0; r < r1; r += kTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(kTileRows, r1 - r));
        (*tiles)[nr - 1][nt - 1](wdata + r * w_row_bytes, w_row_bytes, x, cols, t0, y + r, rows);
      }
    }
  });
}

namespace {

#if defined(K25_MATMUL_PACKED)
// matmul_same_input as one parallel section (parallel_group_works) when every matrix is repacked
// and of one family: Q8_0 or Q4_0 (one type), or the K-quants (one Q8_K quantisation serves Q4_K,
// Q5_K and Q6_K). False, having done nothing, otherwise.
bool same_input_section(const TensorView* const* ws, float* const* ys, int n, const float* x,
                        int n_tokens, ThreadPool& pool) {
  const TensorView& first = *ws[0];
  const int64_t cols = first.row_length();
  const bool legacy = first.type == DType::Q8_0 || first.type == DType::Q4_0;
  int64_t multiply_adds = 0;
  for (int i = 0; i < n; ++i) {
    const TensorView& w = *ws[i];
    const bool same_family = legacy ? w.type == first.type : is_packed_k(w);
    if (w.packed == nullptr || !same_family || w.row_length() != cols || w.n_rows() == 0) {
      return false;
    }
    check_weight_data(w);
    multiply_adds += w.n_rows() * cols * n_tokens;
  }
  ThreadPool& p = pool_for(multiply_adds, pool);
  std::vector<GroupWork> works;
  if (legacy) {
    const QKind kind = first.type == DType::Q8_0 ? QKind::kQ8 : QKind::kQ4;
    const QuantizedActs acts = quantize_q8_acts(x, n_tokens, cols, packed_bias_multiplier(kind),
                                                packed_reads_abs(kind), p);
    for (int i = 0; i < n; ++i) {
      works.push_back(packed_work(kind, nullptr, 0, static_cast<const uint8_t*>(ws[i]->packed),
                                  ws[i]->n_rows(), acts, ys[i]));
    }
    parallel_group_works(p, works, n_tokens, kPackTokens);
    return true;
  }
  const PackedKActs acts = quantize_k_acts(x, n_tokens, cols, p);
  for (int i = 0; i < n; ++i) works.push_back(packed_k_work(*ws[i], acts, n_tokens, ys[i]));
  parallel_group_works(p, works, n_tokens, kPackedKTokens);
  return true;
}
#endif

}  // namespace

void matmul_same_input(const TensorView* const* ws, float* const* ys, int n, const float* x,
                       int n_tokens, ThreadPool& pool) {
#if defined(K25_MATMUL_PACKED)
  if (n > 1 && n_tokens > 0 && same_input_section(ws, ys, n, x, n_tokens, pool)) return;
#endif
  for (int i = 0; i < n; ++i) matmul(*ws[i], x, n_tokens, ys[i], pool);
}

}  // namespace k25::K25_KERNEL_SET
