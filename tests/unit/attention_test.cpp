// attend_queries against a double-precision softmax attention, for head sizes on the blocked
// paths (multiples of 64 on AVX-512, of 16 on AVX2) and off them, query counts around the score
// and value blocks, key counts around the 16-key tiles, different causal limits per query, the
// cache split into spans and its keys as rows or in tiles of 16 (kernels/kv_dtype.h); and
// partial outputs over position ranges merged (attention_split.h).
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"
#include "kernels/ops.h"
#include "model/attention_split.h"

namespace k25 {
namespace {

struct Case {
  int head_dim;
  int kv_stride;
  std::vector<float> keys, values;  // n_cached rows of kv_stride floats
  std::vector<float> key_tiles;     // the keys in tiles of kKeyTile positions
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
  const int n_tiles = (n_cached + kKeyTile - 1) / kKeyTile;
  c.key_tiles.assign(static_cast<size_t>(n_tiles) * kKeyTile * c.kv_stride, NAN);
  for (int p = 0; p < n_cached; ++p) {
    for (int d = 0; d < c.kv_stride; ++d) {
      c.key_tiles[(static_cast<size_t>(p / kKeyTile) * c.kv_stride + d) * kKeyTile + p % kKeyTile] =
          c.keys[static_cast<size_t>(p) * c.kv_stride + d];
    }
  }
  c.q.resize(static_cast<size_t>(n_queries) * head_dim);
  for (auto& v : c.q) v = 2.0f * g(rng);
  for (int i = 0; i < n_queries; ++i) c.n_pos.push_back(i == 0 ? n_cached : pos(rng));
  c.first.assign(n_queries, 0);
  return c;
}

// The cache as spans of at most span_len positions, the keys as rows (key_tile 1) or in tiles of
// kKeyTile (span_len then a multiple of it). The positions past n_cached in the last tile are
// NaN: what they score must not reach an output.
std::vector<KvSpan> spans_of(const Case& c, int n_cached, int span_len, int key_tile = 1) {
  std::vector<KvSpan> spans;
  for (int p = 0; p < n_cached; p += span_len) {
    const float* keys = key_tile == 1 ? c.keys.data() + static_cast<size_t>(p) * c.kv_stride
                                      : c.key_tiles.data() + static_cast<size_t>(p) * c.kv_stride;
    spans.push_back({keys, c.values.data() + static_cast<size_t>(p) * c.kv_stride,
                     std::min(span_len, n_cached - p), key_tile});
  }
  return spans;
}

// Every query's output in double precision: softmax(q . k * scale) over [first, n_pos) times v.
std::vector<double> reference_outputs(const Case& c) {
  const int hd = c.head_dim;
  const int n_queries = static_cast<int>(c.n_pos.size());
  const double scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<double> out(static_cast<size_t>(n_queries) * hd);
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
      out[static_cast<size_t>(i) * hd + d] = ref;
    }
  }
  return out;
}

void check_case(const Case& c, int n_cached, int span_len, int key_tile = 1) {
  const int hd = c.head_dim;
  const int n_queries = static_cast<int>(c.n_pos.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> out(static_cast<size_t>(n_queries) * hd, NAN);
  std::vector<AttentionQuery> queries;
  for (int i = 0; i < n_queries; ++i) {
    queries.push_back({c.q.data() + i * hd, c.n_pos[i], out.data() + i * hd, c.first[i]});
  }
  const std::vector<KvSpan> spans = spans_of(c, n_cached, span_len, key_tile);
  std::vector<float> scratch;
  attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                 c.kv_stride, hd, scale, scratch);
  const std::vector<double> want = reference_outputs(c);
  for (int i = 0; i < n_queries; ++i) {
    for (int d = 0; d < hd; ++d) {
      ASSERT_NEAR(out[i * hd + d], want[i * hd + d], 2e-5)
          << "head_dim " << hd << " cached " << n_cached << " span " << span_len << " key tile "
          << key_tile << " query " << i << " of " << n_queries << " n_pos " << c.n_pos[i] << " dim "
          << d;
    }
  }
}

TEST(AttentionTest, MatchesReferenceForBlockedAndPortableHeadSizes) {
  std::mt19937 rng(11);
  for (int head_dim : {8, 16, 24, 48, 64, 80, 128}) {
    for (int n_cached : {1, 2, 3, 4, 7, 33, 150}) {
      for (int n_queries : {1, 3, 4, 5, 6, 7, 8, 9, 17}) {
        const Case c = make_case(head_dim, n_cached, n_queries, rng);
        for (int span_len : {1, 5, 64}) check_case(c, n_cached, span_len);
        for (int span_len : {16, 32, 160}) check_case(c, n_cached, span_len, kKeyTile);
      }
    }
  }
}

// Sliding-window layers: each query attends to [first, n_pos) only.
TEST(AttentionTest, QueriesAttendOnlyFromTheirFirstPosition) {
  std::mt19937 rng(14);
  for (int head_dim : {8, 24, 64}) {
    for (int n_queries : {1, 5, 9}) {
      Case c = make_case(head_dim, 150, n_queries, rng);
      for (int i = 0; i < n_queries; ++i) c.first[i] = std::max(0, c.n_pos[i] - 1 - 7 * i);
      for (int span_len : {1, 16, 150}) check_case(c, 150, span_len);
      for (int span_len : {16, 160}) check_case(c, 150, span_len, kKeyTile);
    }
  }
}

TEST(AttentionTest, LargeScoresDoNotOverflow) {
  std::mt19937 rng(12);
  Case c = make_case(64, 20, 6, rng);
  for (auto& v : c.q) v *= 10.0f;  // logits in the tens
  check_case(c, 20, 8);
  check_case(c, 20, 16, kKeyTile);
}

// A query's output must not depend on which other queries share the call (batch composition,
// micro-task size, GQA grouping), nor on how the cache is split into spans or its keys into
// tiles: the engine relies on it for outputs that do not change with load (and the L1 window
// gives rows where the pages give tiles).
TEST(AttentionTest, OutputIsBitwiseIndependentOfTheOtherQueriesAndSpans) {
  std::mt19937 rng(13);
  for (int head_dim : {8, 16, 24, 48, 64, 128}) {
    const int n_cached = 150, n_queries = 13;
    const Case c = make_case(head_dim, n_cached, n_queries, rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    std::vector<float> scratch;
    const auto run = [&](const std::vector<int>& which, int span_len, int key_tile) {
      std::vector<float> out(which.size() * head_dim);
      std::vector<AttentionQuery> queries;
      for (size_t i = 0; i < which.size(); ++i) {
        queries.push_back(
            {c.q.data() + which[i] * head_dim, c.n_pos[which[i]], out.data() + i * head_dim});
      }
      const std::vector<KvSpan> spans = spans_of(c, n_cached, span_len, key_tile);
      attend_queries(queries.data(), static_cast<int>(queries.size()), spans.data(),
                     static_cast<int>(spans.size()), c.kv_stride, head_dim, scale, scratch);
      return out;
    };
    std::vector<int> all(n_queries);
    for (int i = 0; i < n_queries; ++i) all[i] = i;
    const std::vector<float> together = run(all, 16, kKeyTile);
    for (int i = 0; i < n_queries; ++i) {
      for (const auto& [span_len, key_tile] : {std::pair{16, 1}, {150, 1}, {32, kKeyTile}}) {
        const std::vector<float> alone = run({i}, span_len, key_tile);
        const std::vector<float> shuffled =
            run({(i + 5) % n_queries, i, (i + 1) % n_queries}, 7, 1);
        ASSERT_EQ(
            0, std::memcmp(alone.data(), together.data() + i * head_dim, head_dim * sizeof(float)))
            << "query " << i << " head_dim " << head_dim << " span " << span_len << " key tile "
            << key_tile;
        ASSERT_EQ(0,
                  std::memcmp(alone.data(), shuffled.data() + head_dim, head_dim * sizeof(float)))
            << "query " << i << " head_dim " << head_dim;
      }
    }
  }
}

// Each query over consecutive position ranges, with stats, merged: the softmax over the whole
// window (to float rounding), and with one range the same bits as a call without stats.
TEST(AttentionTest, PartsOverPositionRangesMergeToTheWhole) {
  std::mt19937 rng(15);
  for (int head_dim : {8, 48, 64}) {
    const int n_cached = 150, n_queries = 6, hd = head_dim;
    Case c = make_case(head_dim, n_cached, n_queries, rng);
    for (int i = 0; i < n_queries; ++i) c.n_pos[i] = n_cached - 3 * i;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const std::vector<int> cuts = {0, 40, 41, 100, n_cached};  // ranges [cuts[r], cuts[r + 1])
    const int n_parts = static_cast<int>(cuts.size()) - 1;
    std::vector<float> parts(static_cast<size_t>(n_queries) * n_parts * hd);
    std::vector<float> stats(static_cast<size_t>(n_queries) * n_parts * 2);
    std::vector<float> scratch;
    for (int r = 0; r < n_parts; ++r) {
      std::vector<AttentionQuery> queries;
      for (int i = 0; i < n_queries; ++i) {
        const size_t slot = static_cast<size_t>(i) * n_parts + r;
        queries.push_back({c.q.data() + i * hd, std::min(c.n_pos[i], cuts[r + 1]) - cuts[r],
                           parts.data() + slot * hd, 0, stats.data() + slot * 2});
      }
      const KvSpan span{c.keys.data() + static_cast<size_t>(cuts[r]) * c.kv_stride,
                        c.values.data() + static_cast<size_t>(cuts[r]) * c.kv_stride,
                        cuts[r + 1] - cuts[r]};
      attend_queries(queries.data(), n_queries, &span, 1, c.kv_stride, hd, scale, scratch);
    }
    std::vector<float> merged(static_cast<size_t>(n_queries) * hd);
    for (int i = 0; i < n_queries; ++i) {
      const size_t slot = static_cast<size_t>(i) * n_parts;
      merge_attention_parts(parts.data() + slot * hd, stats.data() + slot * 2, n_parts, hd,
                            merged.data() + i * hd);
    }
    const std::vector<double> want = reference_outputs(c);
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_NEAR(merged[k], want[k], 2e-5) << "head_dim " << hd << " element " << k;
    }

    std::vector<float> whole(merged.size()), one_part(merged.size()), one_stats(2 * n_queries);
    const std::vector<KvSpan> spans = spans_of(c, n_cached, 16, kKeyTile);
    std::vector<AttentionQuery> plain, with_stats;
    for (int i = 0; i < n_queries; ++i) {
      plain.push_back({c.q.data() + i * hd, c.n_pos[i], whole.data() + i * hd});
      with_stats.push_back(
          {c.q.data() + i * hd, c.n_pos[i], one_part.data() + i * hd, 0, one_stats.data() + 2 * i});
    }
    attend_queries(plain.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                   c.kv_stride, hd, scale, scratch);
    attend_queries(with_stats.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                   c.kv_stride, hd, scale, scratch);
    EXPECT_EQ(0, std::memcmp(whole.data(), one_part.data(), whole.size() * sizeof(float)));
    for (int i = 0; i < n_queries; ++i) {
      std::vector<float> merged_one(hd);
      merge_attention_parts(one_part.data() + i * hd, one_stats.data() + 2 * i, 1, hd,
                            merged_one.data());
      EXPECT_EQ(0, std::memcmp(merged_one.data(), whole.data() + i * hd, hd * sizeof(float)))
          << "query " << i;
    }
  }
}

// Every score's arithmetic is fixed: q[0] k[0], then multiply-adds of q[d] k[d] in order of d
// (fused, except on the x86 scalar set, which has no FMA), times the scale. For heads narrower than
// the blocked kernels' columns (stories260K's are 8; 24 is off the blocked paths of every set),
// and on the scalar set for every head, so is the rest: the softmax is exp_minus_max's and an
// output element is axpy's multiply-adds in position order, times the inverse sum. Bit for bit,
// whatever the queries sharing the call, their windows, the spans and the key tiles.
TEST(AttentionTest, NarrowHeadsComputeEveryQueryInAFixedOrder) {
#if defined(__aarch64__)
  const bool fused = true;  // FMA is part of the base instruction set there
#else
  const bool fused = std::string_view(kernels().isa) != "scalar";
#endif
  std::mt19937 rng(16);
  for (int head_dim : {8, 24}) {
    const int n_cached = 150, n_queries = 19, hd = head_dim;
    Case c = make_case(head_dim, n_cached, n_queries, rng);
    for (int i = 0; i < n_queries; ++i) c.first[i] = i % 3 == 2 ? c.n_pos[i] / 2 : 0;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> want(static_cast<size_t>(n_queries) * hd, 0.0f);
    for (int i = 0; i < n_queries; ++i) {
      std::vector<float> scores(c.n_pos[i]);
      for (int p = c.first[i]; p < c.n_pos[i]; ++p) {
        const float* q = c.q.data() + i * hd;
        const float* k = c.keys.data() + p * c.kv_stride;
        float dot = q[0] * k[0];
        for (int d = 1; d < hd; ++d) dot = fused ? std::fma(q[d], k[d], dot) : dot + q[d] * k[d];
        scores[p] = dot * scale;
      }
      const float inv_sum =
          1.0f / exp_minus_max(scores.data() + c.first[i], c.n_pos[i] - c.first[i]);
      float* out = want.data() + i * hd;
      for (int p = c.first[i]; p < c.n_pos[i]; ++p) {
        axpy(out, scores[p], c.values.data() + p * c.kv_stride, hd);
      }
      for (int d = 0; d < hd; ++d) out[d] *= inv_sum;
    }
    for (const auto& [span_len, key_tile] :
         {std::pair{5, 1}, {16, 1}, {150, 1}, {16, kKeyTile}, {48, kKeyTile}}) {
      std::vector<float> got(want.size(), NAN);
      std::vector<AttentionQuery> queries;
      for (int i = 0; i < n_queries; ++i) {
        queries.push_back({c.q.data() + i * hd, c.n_pos[i], got.data() + i * hd, c.first[i]});
      }
      const std::vector<KvSpan> spans = spans_of(c, n_cached, span_len, key_tile);
      std::vector<float> scratch;
      attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                     c.kv_stride, hd, scale, scratch);
      for (int i = 0; i < n_queries; ++i) {
        EXPECT_EQ(0, std::memcmp(got.data() + i * hd, want.data() + i * hd, hd * sizeof(float)))
            << "head_dim " << hd << " span " << span_len << " key tile " << key_tile << " query "
            << i;
      }
    }
  }
}

}  // namespace
}  // namespace k25
