#include "kv/paged_kv_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "interleaved_run.h"
#include "kv_runs.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

using ::testing::HasSubstr;

// A value that names its (sequence, layer, K/V, position, element) slot.
float tag(int seq, int layer, bool value, int pos, int i) {
  return static_cast<float>((((seq * 8 + layer) * 2 + (value ? 1 : 0)) * 1000 + pos) * 16 + i);
}

void write_row(KvCache& kv, int seq, int layer, int pos, int kv_dim) {
  std::vector<float> k(kv_dim), v(kv_dim);
  for (int i = 0; i < kv_dim; ++i) {
    k[i] = tag(seq, layer, false, pos, i);
    v[i] = tag(seq, layer, true, pos, i);
  }
  kv.store(seq, layer, pos, k.data(), v.data(), kv_dim);
}

// Reads positions [0, n) run by run, as attention does (keys tile by tile), and checks every
// element.
void expect_rows(KvCache& kv, int seq, int n_layers, int n, int kv_dim) {
  for (int layer = 0; layer < n_layers; ++layer) {
    testing::for_each_value(kv, seq, layer, n, kv_dim, [&](int p, const float* row) {
      for (int i = 0; i < kv_dim; ++i) {
        ASSERT_EQ(row[i], tag(seq, layer, true, p, i))
            << "seq " << seq << " layer " << layer << " pos " << p << " value";
      }
    });
    testing::for_each_key(kv, seq, layer, n, kv_dim, [&](int p, auto element) {
      for (int i = 0; i < kv_dim; ++i) {
        ASSERT_EQ(element(i), tag(seq, layer, false, p, i))
            << "seq " << seq << " layer " << layer << " pos " << p << " key";
      }
    });
  }
}

TEST(PagedKvCache, RowsSurvivePageBoundaries) {
  const int n_layers = 2, kv_dim = 5, page = 3;
  PagedKvCache kv(n_layers, kv_dim, 100, 1 << 20, page);
  EXPECT_EQ(kv.pages_used(), 0u);
  kv.reserve(0, 11);
  EXPECT_EQ(kv.pages_used(), 4u);  // ceil(11 / 3)
  EXPECT_EQ(kv.bytes_used(), 4 * kv.pool().page_bytes());
  for (int layer = 0; layer < n_layers; ++layer) {
    for (int pos = 0; pos < 11; ++pos) {
      const KeyRun run = kv.key_run(0, layer, pos);
      EXPECT_EQ(run.n, page - pos % page);
      EXPECT_EQ(run.width, 1) << "pages of 3 positions hold keys as rows";
      if (pos % page == 0) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(run.tile) % PagePool::kAlignment, 0u) << pos;
      }
      write_row(kv, 0, layer, pos, kv_dim);
    }
  }
  expect_rows(kv, 0, n_layers, 11, kv_dim);
  kv.reserve(0, 30);  // growing keeps earlier rows in place
  expect_rows(kv, 0, n_layers, 11, kv_dim);
  int run = 0;
  EXPECT_NO_THROW(kv.key_run(0, 0, 29));
  EXPECT_THROW(kv.key_run(0, 0, 30), Error);
  EXPECT_THROW(kv.key_run(0, 2, 0), Error);
  EXPECT_THROW(kv.values(1, 0, 0, &run), Error);
}

TEST(PagedKvCache, InterleavedSequencesKeepSeparatePages) {
  const int n_layers = 3, kv_dim = 4;
  PagedKvCache kv(n_layers, kv_dim, 64, 1 << 20, /*page_tokens=*/4);
  for (int pos = 0; pos < 23; ++pos) {
    for (int seq : {0, 5}) {  // one position of each in turn, as a batched decode would
      kv.reserve(seq, pos + 1);
      for (int layer = 0; layer < n_layers; ++layer) write_row(kv, seq, layer, pos, kv_dim);
    }
  }
  expect_rows(kv, 0, n_layers, 23, kv_dim);
  expect_rows(kv, 5, n_layers, 23, kv_dim);
  std::set<PageId> pages(kv.page_table(0).begin(), kv.page_table(0).end());
  pages.insert(kv.page_table(5).begin(), kv.page_table(5).end());
  EXPECT_EQ(pages.size(), 12u);
  EXPECT_EQ(kv.pages_used(), 12u);
  EXPECT_TRUE(kv.page_table(3).empty());
}

TEST(PagedKvCache, KeysSitInTheWidestTilesThePagesAllow) {
  const int n_layers = 2, kv_dim = 5;
  for (const auto& [page, width] : {std::pair{4, 4}, {8, 8}, {16, 16}, {24, 8}, {32, 16}}) {
    PagedKvCache kv(n_layers, kv_dim, 100, 1 << 20, page);
    kv.reserve(0, 70);
    for (int layer = 0; layer < n_layers; ++layer) {
      for (int pos = 0; pos < 70; ++pos) write_row(kv, 0, layer, pos, kv_dim);
    }
    const KeyRun run = kv.key_run(0, 1, page + width + 1);  // a page's second tile, or the next
    EXPECT_EQ(run.width, width) << page;
    EXPECT_EQ(run.lane, 1) << page;
    EXPECT_EQ(run.n, page - (width + 1) % page) << page;
    expect_rows(kv, 0, n_layers, 70, kv_dim);
  }
}

TEST(PagedKvCache, ClearReturnsPagesAtOnce) {
  const int kv_dim = 8;
  PagedKvCache kv(1, kv_dim, 64, 1 << 20, 4);
  kv.reserve(0, 10);
  kv.reserve(1, 10);
  const size_t both = kv.bytes_used();
  kv.clear(0);
  EXPECT_EQ(kv.pages_used(), 3u);
  EXPECT_EQ(kv.bytes_used(), both / 2);
  EXPECT_THROW(kv.key_run(0, 0, 0), Error);
  kv.clear(1);
  kv.clear(7);  // unknown sequences are a no-op
  kv.clear(-1);
  EXPECT_EQ(kv.pages_used(), 0u);
  EXPECT_EQ(kv.bytes_used(), 0u);
  kv.reserve(0, 5);  // pages come back from the pool
  for (int pos = 0; pos < 5; ++pos) write_row(kv, 0, 0, pos, kv_dim);
  expect_rows(kv, 0, 1, 5, kv_dim);
}

TEST(PagedKvCache, TruncateGivesBackOnlyThePagesPastTheKeptPositions) {
  const int kv_dim = 8;
  PagedKvCache kv(1, kv_dim, 64, 1 << 20, 4);
  kv.reserve(0, 14);  // 4 pages
  for (int pos = 0; pos < 14; ++pos) write_row(kv, 0, 0, pos, kv_dim);
  EXPECT_EQ(kv.pages_missing(0, 20), 1);
  kv.truncate(0, 6);  // positions 0..5: 2 pages
  EXPECT_EQ(kv.pages_used(), 2u);
  EXPECT_EQ(kv.page_table(0).size(), 2u);
  expect_rows(kv, 0, 1, 6, kv_dim);  // the kept rows are untouched
  kv.truncate(0, 8);                 // holds no more than 8 need: a no-op
  EXPECT_EQ(kv.pages_used(), 2u);
  kv.truncate(0, 0);
  EXPECT_EQ(kv.pages_used(), 0u);
  kv.truncate(3, 0);  // unknown sequences are a no-op
  kv.truncate(-1, 0);
  EXPECT_EQ(kv.pages_missing(-1, 4), -1);
}

TEST(PagedKvCache, ReserveBeyondTheBudgetThrowsAndChangesNothing) {
  PagedKvCache probe(2, 8, 1000, 1 << 20, 4);
  const size_t page_bytes = probe.pool().page_bytes();
  PagedKvCache kv(2, 8, 1000, 4 * page_bytes + page_bytes / 2, 4);
  EXPECT_EQ(kv.bytes_budget(), 4 * page_bytes + page_bytes / 2);
  kv.reserve(0, 12);  // 3 pages
  try {
    kv.reserve(1, 8);  // 2 pages, 1 free
    FAIL() << "expected the pool to be exhausted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("KV pool exhausted: 3 pages of 4 in use"));
  }
  EXPECT_EQ(kv.pages_used(), 3u) << "a failed reserve takes no pages";
  EXPECT_TRUE(kv.page_table(1).empty());
  kv.reserve(1, 4);
  EXPECT_LE(kv.bytes_used(), kv.bytes_budget());
  EXPECT_THROW(kv.reserve(0, 13), Error);
  EXPECT_THROW(kv.reserve(0, 1001), Error);  // beyond the context
  EXPECT_THROW(kv.reserve(-1, 1), Error);
  kv.clear(0);
  EXPECT_NO_THROW(kv.reserve(1, 16));
}

TEST(PagedKvCache, CanReserveAgreesWithReserve) {
  PagedKvCache probe(1, 4, 40, 1 << 20, 3);
  PagedKvCache kv(1, 4, 40, 7 * probe.pool().page_bytes(), 3);
  // A fixed walk of requests that fills, overflows and drains the pool.
  const int requests[][2] = {{0, 5}, {1, 9},  {0, 6},  {2, 4}, {0, 7},  {2, 6},  {1, 12},
                             {3, 1}, {0, 41}, {-2, 1}, {2, 0}, {2, -3}, {1, 40}, {4, 3}};
  for (const auto& [seq, n] : requests) {
    const bool predicted = kv.can_reserve(seq, n);
    const size_t pages_before = kv.pages_used();
    bool succeeded = true;
    try {
      kv.reserve(seq, n);
    } catch (const Error&) {
      succeeded = false;
      EXPECT_EQ(kv.pages_used(), pages_before);
    }
    EXPECT_EQ(predicted, succeeded) << "reserve(" << seq << ", " << n << ")";
    if (seq == 1 && n == 12) kv.clear(0);
  }
  EXPECT_EQ(kv.pages_used(), 7u);
}

// The forward pass through a PagedKvCache gives the logits it gives through a ContiguousKvCache.
class PagedKvCacheModel : public ::testing::TestWithParam<int> {
 protected:
  static float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
  }
};

// Every prompt token in one forward call.
constexpr int kOneBatch = 1 << 20;

TEST_P(PagedKvCacheModel, LogitsEqualContiguousCache) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const ModelConfig& c = model->config();
  const Tokenizer& tok = model->tokenizer();
  const std::vector<std::vector<TokenId>> cases[] = {
      {tok.encode("Once upon a time there was a little dog named Max", true, false)},
      {tok.encode("Lily and Ben went to the park", true, false),
       tok.encode("The cat sat on the mat and looked at the big red ball", true, false)},
  };
  for (const auto& prompts : cases) {
    ContiguousKvCache contiguous(c.n_layers, c.kv_dim(), c.context_length);
    const std::vector<float> expected =
        testing::run_interleaved_greedy(*model, contiguous, prompts, kOneBatch, 6, nullptr);
    PagedKvCache paged(c.n_layers, c.kv_dim(), c.context_length, 8 << 20, GetParam());
    const std::vector<float> got =
        testing::run_interleaved_greedy(*model, paged, prompts, kOneBatch, 6, &expected);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LE(max_abs_diff(got, expected), 1e-5f)
        << prompts.size() << " sequence(s), page_tokens " << GetParam();
    size_t positions = 0;
    for (const auto& p : prompts) positions += p.size() + 6;
    EXPECT_LE(paged.pages_used() * static_cast<size_t>(GetParam()),
              positions + prompts.size() * (GetParam() - 1))
        << "pages follow the positions written, not the context";
  }
}

INSTANTIATE_TEST_SUITE_P(PageTokens, PagedKvCacheModel, ::testing::Values(1, 3, 16));

}  // namespace
}  // namespace k25
