// attend_queries against a double-precision softmax attention, for head sizes on the blocked
// AVX-512 path (multiples of 64) and off it, query counts around the 4-query blocks, key counts
// around the 4-key blocks, different causal limits per query and the cache split into spans.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace k25 {
namespace {

struct Case {
  int head_dim;
  int kv_stride;
  std::vector<float> keys, values;  // n_cached rows of kv_stride floats
  std::vector<float> q;             // n_queries x head_dim
  std::vector<int> n_pos;
  std::vector<int> first;  // the first position each query attends to
};

Case make_case(int head_dim, int n_cached, int n_queries, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> pos(1, n_cached);
  Case c;
  c.head_dim = head_dim;
  c.kv_stride = head_dim + 16;  // rows of the head inside wider KV rows
  c.keys.resize(static_cast<size_t>(n_cached) * c.kv_stride);
  c.values.resize(c.keys.size());
  for (auto& v : c.keys) v = g(rng);
  for (auto& v : c.values) v = g(rng);
  c.q.resize(static_cast<size_t>(n_queries) * head_dim);
  for (auto& v : c.q) v = 2.0f * g(rng);
  for (int i = 0; i < n_queries; ++i) c.n_pos.push_back(i == 0 ? n_cached : pos(rng));
  c.first.assign(n_queries, 0);
  return c;
}

// The cache as spans of at most span_len positions.
std::vector<KvSpan> spans_of(const Case& c, int n_cached, int span_len) {
  std::vector<KvSpan> spans;
  for (int p = 0; p < n_cached; p += span_len) {
    spans.push_back({c.keys.data() + static_cast<size_t>(p) * c.kv_stride,
                     c.values.data() + static_cast<size_t>(p) * c.kv_stride,
                     std::min(span_len, n_cached - p)});
  }
  return spans;
}

void check_case(const Case& c, int n_cached, int span_len) {
  const int hd = c.head_dim;
  const int n_queries = static_cast<int>(c.n_pos.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> out(static_cast<size_t>(n_queries) * hd, NAN);
  std::vector<AttentionQuery> queries;
  for (int i = 0; i < n_queries; ++i) {
    queries.push_back({c.q.data() + i * hd, c.n_pos[i], out.data() + i * hd, c.first[i]});
  }
  const std::vector<KvSpan> spans = spans_of(c, n_cached, span_len);
  std::vector<float> scratch;
  attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                 c.kv_stride, hd, scale, scratch);
  for (int i = 0; i < n_queries; ++i) {
    std::vector<double> w(c.n_pos[i], 0.0);
    double max = -INFINITY;
    for (int p = c.first[i]; p < c.n_pos[i]; ++p) {
      double dot = 0.0;
      for (int d = 0; d < hd; ++d) dot += double{c.q[i * hd + d]} * c.keys[p * c.kv_stride + d];
      w[p] = dot * scale;
      max = std::max(max, w[p]);
    }
    double sum = 0.0;
    for (int p = c.first[i]; p < c.n_pos[i]; ++p) sum += (w[p] = std::exp(w[p] - max));
    for (int d = 0; d < hd; ++d) {
      double ref = 0.0;
      for (int p = c.first[i]; p < c.n_pos[i]; ++p)
        ref += w[p] / sum * c.values[p * c.kv_stride + d];
      ASSERT_NEAR(out[i * hd + d], ref, 2e-5)
          << "head_dim " << hd << " cached " << n_cached << " span " << span_len << " query " << i
          << " of " << n_queries << " n_pos " << c.n_pos[i] << " dim " << d;
    }
  }
}

TEST(AttentionTest, MatchesReferenceForBlockedAndPortableHeadSizes) {
  std::mt19937 rng(11);
  for (int head_dim : {8, 48, 64, 128}) {
    for (int n_cached : {1, 3, 4, 7, 33, 150}) {
      for (int n_queries : {1, 3, 4, 5, 8, 9}) {
        const Case c = make_case(head_dim, n_cached, n_queries, rng);
        for (int span_len : {1, 5, 64}) check_case(c, n_cached, span_len);
      }
    }
  }
}

// Sliding-window layers: each query attends to [first, n_pos) only.
TEST(AttentionTest, QueriesAttendOnlyFromTheirFirstPosition) {
  std::mt19937 rng(14);
  for (int head_dim : {8, 64}) {
    for (int n_queries : {1, 5, 9}) {
      Case c = make_case(head_dim, 150, n_queries, rng);
      for (int i = 0; i < n_queries; ++i) c.first[i] = std::max(0, c.n_pos[i] - 1 - 7 * i);
      for (int span_len : {1, 16, 150}) check_case(c, 150, span_len);
    }
  }
}

TEST(AttentionTest, LargeScoresDoNotOverflow) {
  std::mt19937 rng(12);
  Case c = make_case(64, 20, 6, rng);
  for (auto& v : c.q) v *= 10.0f;  // logits in the tens
  check_case(c, 20, 8);
}

// A query's output must not depend on which other queries share the call (batch composition,
// micro-task size, GQA grouping), nor on how the cache is split into spans: the engine relies on
// it for outputs that do not change with load.
TEST(AttentionTest, OutputIsBitwiseIndependentOfTheOtherQueriesAndSpans) {
  std::mt19937 rng(13);
  for (int head_dim : {64, 128}) {
    const int n_cached = 150, n_queries = 13;
    const Case c = make_case(head_dim, n_cached, n_queries, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    std::vector<float> scratch;
    const auto run = [&](const std::vector<int>& which, int span_len) {
      std::vector<float> out(which.size() * head_dim);
      std::vector<AttentionQuery> queries;
      for (size_t i = 0; i < which.size(); ++i) {
        queries.push_back(
            {c.q.data() + which[i] * head_dim, c.n_pos[which[i]], out.data() + i * head_dim});
      }
      const std::vector<KvSpan> spans = spans_of(c, n_cached, span_len);
      attend_queries(queries.data(), static_cast<int>(queries.size()), spans.data(),
                     static_cast<int>(spans.size()), c.kv_stride, head_dim, scale, scratch);
      return out;
    };
    std::vector<int> all(n_queries);
    for (int i = 0; i < n_queries; ++i) all[i] = i;
    const std::vector<float> together = run(all, 16);
    for (int i = 0; i < n_queries; ++i) {
      for (int span_len : {16, 150}) {
        const std::vector<float> alone = run({i}, span_len);
        const std::vector<float> shuffled = run({(i + 5) % n_queries, i, (i + 1) % n_queries}, 7);
        ASSERT_EQ(
            0, std::memcmp(alone.data(), together.data() + i * head_dim, head_dim * sizeof(float)))
            << "query " << i << " head_dim " << head_dim << " span " << span_len;
        ASSERT_EQ(0,
                  std::memcmp(alone.data(), shuffled.data() + head_dim, head_dim * sizeof(float)))
            << "query " << i << " head_dim " << head_dim;
      }
    }
  }
}

}  // namespace
}  // namespace k25
