// Element-wise kernels against double-precision references, for lengths around the vector
// widths (so both the vector body and the scalar tail run), and the edge values attention uses
// (-inf scores from masking, large magnitudes in silu).
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/quant.h"

namespace k25 {
namespace {

std::vector<float> random_vec(int n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

const int kLengths[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 100, 172, 2048};

TEST(OpsTest, Rmsnorm) {
  for (int n : kLengths) {
    const auto x = random_vec(n, n, 3.0f);
    const auto w = random_vec(n, n + 1);
    std::vector<float> out(n);
    rmsnorm(out.data(), x.data(), w.data(), n, 1e-5f);
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) {
      ASSERT_NEAR(out[i], x[i] * scale * w[i], 1e-6 * std::fabs(x[i] * scale * w[i]) + 1e-7)
          << n << " " << i;
    }
    // In place (out == x) is allowed.
    auto y = x;
    rmsnorm(y.data(), y.data(), w.data(), n, 1e-5f);
    for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], out[i]);
  }
}

TEST(OpsTest, Softmax) {
  for (int n : kLengths) {
    auto x = random_vec(n, n, 5.0f);
    const auto orig = x;
    softmax(x.data(), n);
    double mx = -INFINITY;
    for (float v : orig) mx = std::fmax(mx, v);
    double sum = 0;
    for (float v : orig) sum += std::exp(double{v} - mx);
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const double ref = std::exp(double{orig[i]} - mx) / sum;
      ASSERT_NEAR(x[i], ref, 1e-5 * ref + 1e-12) << n << " " << i;  // float sum of n terms
      total += x[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(OpsTest, SoftmaxWithMaskedEntriesAndExtremes) {
  std::vector<float> x(19, -INFINITY);
  x[3] = 0.0f;
  x[11] = 0.0f;
  x[18] = -200.0f;
  softmax(x.data(), 19);
  for (int i = 0; i < 19; ++i) EXPECT_EQ(x[i], (i == 3 || i == 11) ? 0.5f : 0.0f) << i;
  std::vector<float> big = {1000.0f, 999.0f, -1000.0f, 1000.0f, 0, 0, 0, 0, 0};
  softmax(big.data(), 9);
  const float e1 = std::exp(-1.0f);
  EXPECT_NEAR(big[0], 1.0f / (2.0f + e1), 1e-6f);
  EXPECT_NEAR(big[1], e1 / (2.0f + e1), 1e-6f);
  EXPECT_EQ(big[2], 0.0f);
  EXPECT_EQ(big[8], 0.0f);
}

// exp_minus_max's exponentials at the bottom of the float range, where 2^n has its smallest
// exponent (n = -126): expf's values down to -87.3365, zero below (the vector path's cut-off), in
// every lane of a vector and in the scalar tail (the scalar set, std::exp, keeps the subnormals).
TEST(OpsTest, ExpMinusMaxNearUnderflow) {
  const std::vector<float> offsets = {0.0f,     -1.0f,     -80.0f,  -86.9f, -87.0f,  -87.3f,
                                      -87.336f, -87.3364f, -87.34f, -88.0f, -103.0f, -200.0f,
                                      -0.5f,    -87.1f,    -60.25f, -87.2f, -87.33f};
  for (float max : {0.0f, 12.5f, -3.0f}) {
    std::vector<float> x;
    for (float o : offsets) x.push_back(max + o);
    const std::vector<float> orig = x;
    const float sum = exp_minus_max(x.data(), static_cast<int>(x.size()));
    double want_sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float arg = orig[i] - max;
      if (arg < -87.3365f) {
        EXPECT_TRUE(x[i] == 0.0f || x[i] == std::exp(arg)) << arg << " " << x[i];
        continue;
      }
      const double want = std::exp(double{arg});
      want_sum += want;
      EXPECT_NEAR(x[i], want, 2e-6 * want) << arg;
      EXPECT_GT(x[i], 0.0f) << arg;
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum);
  }
}

TEST(OpsTest, SiluMul) {
  for (int n : kLengths) {
    auto a = random_vec(n, n, 4.0f);
    if (n > 4) {
      a[0] = 100.0f;
      a[1] = -100.0f;
      a[2] = -1000.0f;
      a[3] = 89.0f;
    }
    const auto b = random_vec(n, n + 7);
    const auto orig = a;
    silu_mul(a.data(), b.data(), n);
    for (int i = 0; i < n; ++i) {
      const double v = orig[i];
      const double ref = v / (1.0 + std::exp(-v)) * b[i];
      ASSERT_NEAR(a[i], ref, 2e-6 * std::fabs(ref) + 1e-30) << n << " " << i;
    }
  }
}

// The FFN of a batch is one flat array, so where an element falls (in a full vector or a tail)
// must not change its result: each token's slice alone gives the same bits as the whole.
TEST(OpsTest, SiluMulResultDoesNotDependOnTheElementsPosition) {
  constexpr int kRow = 172, kRows = 3;  // stories260K's FFN width: not a multiple of 8
  const auto a = random_vec(kRow * kRows, 5, 4.0f);
  const auto b = random_vec(kRow * kRows, 6);
  auto whole = a;
  silu_mul(whole.data(), b.data(), kRow * kRows);
  for (int r = 0; r < kRows; ++r) {
    std::vector<float> row(a.begin() + r * kRow, a.begin() + (r + 1) * kRow);
    silu_mul(row.data(), b.data() + r * kRow, kRow);
    for (int i = 0; i < kRow; ++i) ASSERT_EQ(row[i], whole[r * kRow + i]) << r << " " << i;
  }
}

// GeGLU as llama.cpp's CPU backend computes it: tanh GELU of the input rounded to F16, the result
// rounded to F16, times the other operand; 0 below -10 and the identity above 10.
TEST(OpsTest, GeluF16MulRoundsInputAndOutputToF16) {
  const auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  std::vector<float> x, b;
  for (float v = -9.9f; v < 9.9f; v += 0.0137f) {
    x.push_back(v);
    b.push_back(1.0f);
  }
  const std::vector<float> in = x;
  gelu_f16_mul(x.data(), b.data(), static_cast<int>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(x[i])), x[i]) << "output is not an F16 value at " << in[i];
    const double expected = gelu(f16_to_f32(f32_to_f16(in[i])));
    // within one F16 step of the exact value of the rounded input
    EXPECT_NEAR(x[i], expected, std::max(1e-7, std::abs(expected) * (1.0 / 1024))) << in[i];
  }
  // Inputs that round to the same F16 value give the same result.
  float same[2] = {1.0f, 1.0f + 1e-4f}, ones[2] = {1.0f, 1.0f};
  ASSERT_EQ(f32_to_f16(same[0]), f32_to_f16(same[1]));
  gelu_f16_mul(same, ones, 2);
  EXPECT_EQ(same[0], same[1]);
  float tails[3] = {-11.0f, 12.0f, 2.0f}, factors[3] = {3.0f, 0.5f, 2.0f};
  gelu_f16_mul(tails, factors, 3);
  EXPECT_EQ(tails[0], 0.0f);
  EXPECT_EQ(tails[1], 6.0f);
  EXPECT_EQ(tails[2], f16_to_f32(f32_to_f16(static_cast<float>(gelu(2.0)))) * 2.0f);
}

TEST(OpsTest, AddDotAxpy) {
  for (int n : kLengths) {
    const auto a = random_vec(n, n);
    const auto b = random_vec(n, n + 3);
    auto c = a;
    add_inplace(c.data(), b.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]);

    double ref = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      ref += double{a[i]} * b[i];
      mag += std::fabs(double{a[i]} * b[i]);
    }
    ASSERT_NEAR(dot_f32(a.data(), b.data(), n), ref, 1e-6 * mag) << n;

    auto d = a;
    axpy(d.data(), 0.37f, b.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(d[i], a[i] + 0.37f * b[i], 1e-6f * (std::fabs(a[i]) + std::fabs(b[i]))) << i;
  }
  EXPECT_EQ(dot_f32(nullptr, nullptr, 0), 0.0f);
}

}  // namespace
}  // namespace k25
